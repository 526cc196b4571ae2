"""Which Kafka software changes a run may make, and why the others are refused (pure data).

Kafka's upgrade notes name the paths: every 3.x release since 3.3 upgrades a KRaft cluster from
"any version 3.3.x through" the previous release, and every 4.x release from "any version 3.3.x
through" the previous 4.x. ZooKeeper-mode clusters upgrade within 3.x (4.0 removed ZooKeeper:
they migrate first, KIP-866). A downgrade is a roll back to an older release after
``metadata.version`` was safely lowered to what that release supports (KIP-778): a release
older than 3.3 knows no ``metadata.version`` and is refused. From 4.4 on, Kafka's upgrade notes
add that a broker "must be the same version as, or newer than, the kafka-storage tool" that
formatted its directories (4.4.0's tool writes the bootstrap records as a snapshot in
``__cluster_metadata-0`` and no ``bootstrap.checkpoint``): a cluster started on 4.4 or newer
cannot roll back below the release it started on.
"""

from __future__ import annotations

from clusters.errors import ClusterError
from clusters.kafka_dist import OLDEST_SUPPORTED, parse_version

ZK_KINDS = ("zk",)
# A migration ends as a KRaft cluster: its upgrade may go past 3.x.
MIGRATION = "migration"
# The first release whose formatted directories older releases may not read.
FORMAT_NOT_FORWARD_COMPATIBLE = (4, 4)


def _line(version: str) -> tuple[int, int]:
    parts = parse_version(version)
    return parts[0], parts[1] if len(parts) > 1 else 0


def _text(line: tuple[int, int]) -> str:
    return f"{line[0]}.{line[1]}"


def check_upgrade(topology: str, version: str, to: str) -> None:
    """Raises ClusterError with the reason when Kafka documents no path from ``version`` to
    ``to`` on ``topology``."""
    a, b = _line(version), _line(to)
    if parse_version(to) <= parse_version(version):
        raise ClusterError(
            f"--upgrade-to {to} is not newer than --version {version}: an upgrade goes to a "
            "newer release (use --downgrade-to to roll back)"
        )
    if a < OLDEST_SUPPORTED:
        raise ClusterError(
            f"Kafka documents KRaft upgrades from 3.3 on (KIP-833); {version} is older"
        )
    if topology in ZK_KINDS and b[0] >= 4:
        raise ClusterError(
            f"a ZooKeeper-mode cluster cannot be upgraded to {to}: Kafka 4.0 removed ZooKeeper; "
            f"migrate first (--topology migration --version {_text(a)} --upgrade-to {to})"
        )


def check_downgrade(topology: str, version: str, to: str, upgraded_to: str | None) -> None:
    """Raises ClusterError when rolling back to ``to`` after ``version`` (and an upgrade to
    ``upgraded_to``, if any) is not a documented path."""
    newest = upgraded_to or version
    if parse_version(to) >= parse_version(newest):
        raise ClusterError(
            f"--downgrade-to {to} is not older than {newest}, the release the cluster runs by then"
        )
    if _line(to) < OLDEST_SUPPORTED:
        raise ClusterError(
            f"Kafka {to} knows no metadata.version (KIP-778 arrived in 3.3): no safe downgrade"
        )
    if _line(version) >= FORMAT_NOT_FORWARD_COMPATIBLE and parse_version(to) < parse_version(
        version
    ):
        raise ClusterError(
            f"--downgrade-to {to} is older than {version}, whose kafka-storage formats the "
            "cluster: from 4.4 on a broker must be the same version as, or newer than, the "
            "kafka-storage tool that formatted its directories (Kafka 4.4's upgrade notes)"
        )
    if topology in ZK_KINDS or topology == MIGRATION:
        raise ClusterError(
            f"a downgrade is a KRaft metadata.version step (KIP-778); topology {topology} "
            "has none to lower (ZooKeeper mode rolls back through inter.broker.protocol.version, "
            "and a finished migration cannot go back to ZooKeeper)"
        )
