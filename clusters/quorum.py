"""Dynamic controller quorums (KIP-853): which runs may have one, how its nodes are configured
and formatted, and what Kafka's ``kafka-metadata-quorum`` tool answers (pure: no Docker).

A static quorum names every voter in ``controller.quorum.voters``. A dynamic one keeps its voter
set in the metadata log: every node finds the quorum through ``controller.quorum.bootstrap.servers``
and the first controllers are formatted with ``--initial-controllers id@host:port:directoryId,...``
(the same value on every controller), brokers and controllers that join later with
``--no-initial-controllers`` (Kafka's StorageTool, 3.9 and 4.x alike; docs "Provisioning
Nodes"). A static quorum becomes dynamic from 4.1 on: ``kraft.version`` upgraded to 1, then
every node configured with ``controller.quorum.bootstrap.servers`` instead of
``controller.quorum.voters`` (docs, KRaft "Upgrade").
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from clusters.errors import ClusterError
from clusters.kafka_dist import parse_version
from clusters.topology import CONTROLLER_PORT, NodeSpec, Topology

STATIC, DYNAMIC, STATIC_TO_DYNAMIC = "static", "dynamic", "static-to-dynamic"
# A dynamic quorum whose controllers join by themselves (KIP-1186, 4.2): a re-provisioned
# controller is not added by a request, it adds itself.
AUTO_JOIN = "dynamic-auto-join"
QUORUMS = (STATIC, DYNAMIC, STATIC_TO_DYNAMIC, AUTO_JOIN)
# KIP-853 shipped in 3.9; going from a static quorum to a dynamic one in 4.1 (KAFKA-16538);
# controller.quorum.auto.join.enable in 4.2 (KIP-1186).
SINCE = {DYNAMIC: (3, 9), STATIC_TO_DYNAMIC: (4, 1), AUTO_JOIN: (4, 2)}
AUTO_JOIN_PROPERTY = "controller.quorum.auto.join.enable"
# Born dynamic: the controllers are formatted with the initial voter set.
BORN_DYNAMIC = (DYNAMIC, AUTO_JOIN)
KRAFT_TOPOLOGIES = ("kraft", "kraft-combined")
KRAFT_VERSION = "kraft.version"


def check_quorum(quorum: str, topology: str, releases: list[str]) -> None:
    """One sentence, before anything is downloaded, when ``quorum`` cannot be had: ``releases``
    are every Kafka release the run starts on or rolls to."""
    if quorum not in QUORUMS:
        raise ClusterError(f"unknown quorum '{quorum}': choose one of {', '.join(QUORUMS)}")
    if quorum == STATIC:
        return
    if topology not in KRAFT_TOPOLOGIES:
        raise ClusterError(
            f"quorum {quorum} needs a KRaft topology ({' or '.join(KRAFT_TOPOLOGIES)}), not "
            f"{topology}"
        )
    if quorum == AUTO_JOIN and topology != "kraft":
        raise ClusterError(
            f"quorum {quorum} replaces a dedicated controller (wiped, then joining by itself): "
            f"it needs the kraft topology, not {topology}"
        )
    since = SINCE[quorum]
    old = [v for v in releases if parse_version(v)[:2] < since]
    if old:
        raise ClusterError(
            f"quorum {quorum} needs Kafka {since[0]}.{since[1]} or newer "
            f"({WHY_SINCE[quorum]}); "
            f"the run uses {', '.join(old)}"
        )
    if quorum == STATIC_TO_DYNAMIC and len(releases) > 1:
        raise ClusterError(
            "quorum static-to-dynamic reconfigures every node itself: it cannot be combined with "
            "--upgrade-to or --downgrade-to"
        )


WHY_SINCE = {
    DYNAMIC: "KIP-853",
    STATIC_TO_DYNAMIC: "kraft.version 1 on a static quorum",
    AUTO_JOIN: f"KIP-1186's {AUTO_JOIN_PROPERTY}",
}


def directory_id(cluster_id: str, node_id: int) -> str:
    """The metadata directory id a node of a dynamic quorum is formatted with: a Kafka Uuid
    (URL-safe base64 of 16 bytes, unpadded) derived from the cluster and the node, so that every
    rendering of the cluster names the same ids. Never one starting with "-" (the tools would read
    it as an option), nor one of Kafka's reserved directory ids (the first 8 bytes zero)."""
    salt = 0
    while True:
        digest = hashlib.sha256(f"kchaos/{cluster_id}/directory/{node_id}/{salt}".encode())
        raw = digest.digest()[:16]
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and any(raw[:8]):
            return text
        salt += 1


def initial_controllers(topo: Topology, cluster_id: str) -> str:
    """``--initial-controllers``: id@host:port:directoryId of every controller, comma-separated."""
    return ",".join(
        f"{n.node_id}@{n.ip}:{CONTROLLER_PORT}:{directory_id(cluster_id, n.node_id)}"
        for n in topo.controllers
    )


def quorum_properties(topo: Topology, dynamic: bool) -> dict[str, str]:
    """How a node finds the controllers: the voters (static) or where to ask (dynamic)."""
    if dynamic:
        return {"controller.quorum.bootstrap.servers": topo.controller_endpoints()}
    return {"controller.quorum.voters": topo.quorum_voters()}


def configured_dynamic(topo: Topology) -> bool:
    """Whether nodes start configured for a dynamic quorum."""
    return topo.quorum in BORN_DYNAMIC


def auto_join_properties(topo: Topology, node: NodeSpec) -> dict[str, str]:
    """What a controller of an auto-joining quorum adds to its configuration."""
    return {AUTO_JOIN_PROPERTY: "true"} if topo.quorum == AUTO_JOIN and node.is_controller else {}


def format_options(
    topo: Topology, node: NodeSpec, cluster_id: str, dynamic: bool, fresh: bool = False
) -> list[str]:
    """kafka-storage format's quorum options for ``node``. A cluster born dynamic formats its
    controllers with the initial voter set; a node configured dynamic later (a static quorum made
    dynamic, or a controller re-provisioned to be added, ``fresh``) joins with
    ``--no-initial-controllers``; a static node gets none."""
    if not dynamic:
        return []
    if node.is_controller and not fresh and topo.quorum in BORN_DYNAMIC:
        return ["--initial-controllers", initial_controllers(topo, cluster_id)]
    return ["--no-initial-controllers"]


# What kafka-metadata-quorum answers --------------------------------------------------------------
@dataclass(frozen=True)
class QuorumStatus:
    """``describe --status``: the leader's view of the quorum."""

    leader: int
    epoch: int
    high_watermark: int | None
    voters: tuple[tuple[int, str | None], ...]  # (id, directory id)
    observers: tuple[tuple[int, str | None], ...] = field(default_factory=tuple)

    def voter_ids(self) -> list[int]:
        return [v for v, _ in self.voters]

    def directory_of(self, node_id: int) -> str | None:
        return next((d for v, d in self.voters if v == node_id), None)

    def to_value(self) -> dict[str, Any]:
        return {
            "leader": self.leader,
            "epoch": self.epoch,
            "high_watermark": self.high_watermark,
            "voters": [[v, d] for v, d in self.voters],
            "observers": [[v, d] for v, d in self.observers],
        }


_REPLICA = re.compile(r'\{"id": (-?\d+), "directoryId": (?:"([^"]+)"|null)')


def _field(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}:\s+(.*)$", text, re.MULTILINE)
    return m.group(1).strip() if m else None


def _replicas(text: str, name: str, until: str | None) -> tuple[tuple[int, str | None], ...]:
    start = re.search(rf"^{name}:", text, re.MULTILINE)
    if start is None:
        return ()
    rest = text[start.end() :]
    if until:
        end = re.search(rf"^{until}:", rest, re.MULTILINE)
        rest = rest[: end.start()] if end else rest
    return tuple(sorted((int(i), d or None) for i, d in _REPLICA.findall(rest)))


def parse_status(stdout: str) -> QuorumStatus | None:
    """The answer of ``kafka-metadata-quorum describe --status`` (its lines ``LeaderId:``,
    ``LeaderEpoch:``, ``HighWatermark:``, ``CurrentVoters:`` and ``CurrentObservers:``, 3.9 and
    4.x alike; the tool's logging may surround them); None when it holds no answer."""
    leader, epoch = _field(stdout, "LeaderId"), _field(stdout, "LeaderEpoch")
    if leader is None or epoch is None or _field(stdout, "CurrentVoters") is None:
        return None
    try:
        hw = _field(stdout, "HighWatermark")
        return QuorumStatus(
            int(leader),
            int(epoch),
            int(hw) if hw is not None else None,
            _replicas(stdout, "CurrentVoters", "CurrentObservers"),
            _replicas(stdout, "CurrentObservers", None),
        )
    except ValueError:
        return None


# The leader's refusals that are decided before it appends anything (Kafka's AddVoterHandler and
# RemoveVoterHandler, 3.9 to 4.3): the change definitely did not happen.
TRANSIENT_REFUSALS = (
    "waiting for leader to handle previous voter change request",
    "waiting for leader to establish HWM",
    "waiting for voters to commit the latest voter change",
    "is not ready to receive requests",
    "since it is lagging behind",
    "since API_VERSIONS returned an error",
)
FINAL_REFUSALS = (
    "Cluster doesn't support adding voter",
    "Cluster doesn't support removing voter",
    "is already part of the set of voters",
    "Cannot remove voter",
    "doesn't support the finalized version",
    # MetadataQuorumCommand's own checks of its arguments and of --command-config: nothing sent.
    "Failed to parse --controller-directory-id",
    "Unable to read meta.properties",
    "No directory id found",
    "Is this a valid controller configuration file?",
    "Cannot find information about controller listener name",
)
_DONE = {
    # "Removed " then " KRaft controller": two spaces, as Kafka prints it (3.9 to 4.3).
    "remove": re.compile(
        r"^Removed\s+KRaft controller (\d+) with directory id (\S+)", re.MULTILINE
    ),
    "add": re.compile(r"^Added controller (\d+) with directory id (\S+)", re.MULTILINE),
}


@dataclass(frozen=True)
class Outcome:
    """What one attempt came to: ``ok`` (acknowledged), ``refused`` (refused before anything was
    appended, for good), ``busy`` (refused before anything was appended, for a reason that may
    pass), ``unknown`` (a timeout, a lost connection, a leader change: the VotersRecord may have
    been appended and committed)."""

    kind: str
    said: str  # what the tool said, its last 600 characters
    directory_id: str | None = None  # as the tool named it, when ok


def membership_outcome(action: str, exit_code: int, stdout: str, stderr: str) -> Outcome:
    """How one ``kafka-metadata-quorum add-controller`` (``action`` "add") or
    ``remove-controller`` ("remove") attempt ended. An attempt is one request only when the
    Admin client does not retry (``retries=0``, ADMIN_PROPERTIES): after a retry a refusal could
    answer the retry of a change the first request made."""
    said = " ".join((stdout.strip() + " " + stderr.strip()).split())[-600:]
    done = _DONE[action].search(stdout)
    if exit_code == 0 and done:
        # The tool's answer line alone: the Admin client's logging around it says nothing more.
        answer = stdout[done.start() :].split("\n", 1)[0].strip()
        return Outcome("ok", answer, directory_id=done.group(2))
    text = stdout + stderr
    if exit_code != 0:
        if any(r in text for r in TRANSIENT_REFUSALS):
            return Outcome("busy", said)
        if any(r in text for r in FINAL_REFUSALS) or stderr.lstrip().startswith("usage:"):
            return Outcome("refused", said)
    return Outcome("unknown", said or f"kafka-metadata-quorum exited {exit_code} and said nothing")


# The Admin client of one attempt: one request (no retries, see membership_outcome), answered or
# given up on well within a partition nemesis's interval.
ADMIN_PROPERTIES = {
    "retries": "0",
    "request.timeout.ms": "10000",
    "default.api.timeout.ms": "15000",
}
