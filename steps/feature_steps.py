"""User-named feature steps (``--features``): what a spec may say, checked without a network, and
where the plan puts each item.

An item is ``[dry-run:]name=level[!unsafe]``, items separated by commas, each one plan step (one
``kafka-features`` request) in the order given:

- ``transaction.version=0``: ``upgrade`` or ``downgrade``, whichever the finalized level at
  step time calls for (the highest-epoch ApiVersions answer just before the step; equal levels
  are an ``upgrade``, which Kafka accepts and records again);
- ``metadata.version=release:4.0``: that release's ``metadata.version`` level, read from the
  jars of the newest release the cluster runs when the step comes (KRaft only);
- ``!unsafe``: always ``downgrade --unsafe`` (KIP-778). No release up to 4.3 performs a lossy
  ``metadata.version`` downgrade: FeatureControlManager downgrades when no metadata format
  changed in between, with or without the flag, and otherwise answers "Unsafe metadata
  downgrade is not supported in this version";
- ``dry-run:``: the same request with ``--dry-run`` (KIP-778: "Validate this downgrade, but do
  not perform it");
- ``release-version=4.0``: ``upgrade --release-version 4.0`` (KIP-1022, Kafka 4.0+: "The release
  version to update all features to"), one request for every production feature at that
  release's default level, which the driver reads from the same tool's ``version-mapping`` just
  before the step.
"""

from __future__ import annotations

import random
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from clusters.errors import ClusterError
from clusters.kafka_dist import parse_version

METADATA_VERSION = "metadata.version"
# KIP-1022's `kafka-features upgrade --release-version X` as an item: not a feature, every one.
RELEASE_VERSION = "release-version"
# The first line whose kafka-features has --release-version (3.9.2's tool does not).
RELEASE_VERSION_FROM = (4, 0)
RELEASE = "release:"
AUTO = "auto"  # upgrade or downgrade, chosen against the finalized level at step time
FORMS = (
    "name=level (upgrade or downgrade, whichever the finalized level calls for), "
    "name=level!unsafe (downgrade --unsafe), dry-run:name=level (--dry-run), "
    "metadata.version=release:X (release X's level), release-version=X (kafka-features upgrade "
    "--release-version X, Kafka 4.0+)"
)
# The finalizable features each line's jars list as production features (the Feature enum of
# server-common, Features before 4.0, read from 3.8.1, 3.9.2, 4.0.2, 4.1.2 and 4.3.1; test
# features left out). A line not listed knows what the nearest listed line below it knows.
KNOWN: dict[tuple[int, int], tuple[str, ...]] = {
    (3, 3): (METADATA_VERSION,),
    (3, 9): (METADATA_VERSION, "kraft.version", "transaction.version"),
    (4, 0): (
        METADATA_VERSION,
        "kraft.version",
        "transaction.version",
        "group.version",
        "eligible.leader.replicas.version",
    ),
    (4, 1): (
        METADATA_VERSION,
        "kraft.version",
        "transaction.version",
        "group.version",
        "eligible.leader.replicas.version",
        "share.version",
        "streams.version",
    ),
}
# Where the user's steps may begin and must have begun, as shares of the time limit, by what
# comes before them: after every roll of an upgrade or a downgrade, and after a migration.
WINDOWS = {
    "alone": (0.1, 0.8),
    "upgrade": (0.45, 0.85),
    "downgrade": (0.65, 0.9),
    "migration": (0.7, 0.85),
    "migration-upgrade": (0.87, 0.93),
}
# ASCII digits only (\d would take any script's digits).
_ITEM = re.compile(r"^(dry-run:)?([a-z][a-z0-9._]*)=([0-9]+|release:[0-9][0-9.]*)(!unsafe)?$")
_RELEASE_ITEM = re.compile(r"^(dry-run:)?release-version=([0-9][0-9.]*)$")
# A finalized feature level is a Java short in Kafka's protocol (UpdateFeatures' MaxVersionLevel,
# KIP-584): 0 (a downgrade to none) up to 32767.
MAX_LEVEL = 32767


class FeatureSpecError(ValueError):
    """An item that cannot be planned; the message names the valid forms."""


@dataclass(frozen=True)
class FeatureItem:
    feature: str
    level: int | str  # a level, or "release:X"
    dry_run: bool = False
    unsafe: bool = False

    @property
    def action(self) -> str:
        if self.feature == RELEASE_VERSION:
            return "upgrade"  # KIP-1022's release version is planned as an upgrade only
        return "downgrade" if self.unsafe else AUTO


def _line(version: str) -> tuple[int, int]:
    major, minor = (*parse_version(version), 0)[:2]
    return major, minor


def known_features(version: str) -> tuple[str, ...]:
    """The finalizable features release ``version`` knows (see KNOWN)."""
    line = _line(version)
    below = [k for k in KNOWN if k <= line]
    return KNOWN[max(below)] if below else ()


def parse_features(text: str, version: str, topology: str = "kraft-combined") -> list[FeatureItem]:
    """The items of a ``--features`` value for steps run on release ``version``; one
    FeatureSpecError sentence for the first item that cannot be planned."""
    items = [t.strip() for t in text.split(",")]
    if not any(items):
        raise FeatureSpecError(f"features: name at least one item; the forms are {FORMS}")
    known = known_features(version)
    out = []
    for raw in items:
        if raw.startswith((RELEASE_VERSION, "dry-run:" + RELEASE_VERSION)):
            out.append(_release_item(raw, version, topology))
            continue
        m = _ITEM.match(raw)
        if m is None:
            raise FeatureSpecError(
                f"features: cannot read '{raw}': the forms are {FORMS}; Kafka {version} knows "
                f"{', '.join(known)}"
            )
        dry, name, level, unsafe = m.groups()
        if name not in known:
            raise FeatureSpecError(
                f"features: '{name}' in '{raw}' is no feature Kafka {version} can finalize: it "
                f"knows {', '.join(known)}; the forms are {FORMS}"
            )
        if level.startswith(RELEASE):
            release = level[len(RELEASE) :]
            if name != METADATA_VERSION:
                raise FeatureSpecError(
                    f"features: '{raw}': only metadata.version takes a release level; the forms "
                    f"are {FORMS}"
                )
            try:
                line = _line(release)
            except ClusterError as exc:
                raise FeatureSpecError(f"features: '{raw}': {exc}") from None
            if not (3, 3) <= line <= _line(version):
                raise FeatureSpecError(
                    f"features: '{raw}': a release from 3.3 (KRaft's first production "
                    f"metadata.version) to {version} (the release the step runs on)"
                )
        if not level.startswith(RELEASE) and int(level) > MAX_LEVEL:
            raise FeatureSpecError(
                f"features: '{raw}': a feature level is 0..{MAX_LEVEL} (a Java short in Kafka's "
                "protocol)"
            )
        if name == METADATA_VERSION and topology == "zk":
            raise FeatureSpecError(
                f"features: '{raw}': ZooKeeper mode has no metadata.version (KIP-778 is KRaft's)"
            )
        out.append(
            FeatureItem(
                name,
                level if level.startswith(RELEASE) else int(level),
                dry_run=bool(dry),
                unsafe=bool(unsafe),
            )
        )
    return out


def _release_item(raw: str, version: str, topology: str) -> FeatureItem:
    """``[dry-run:]release-version=X``: KIP-1022's one request for every production feature."""
    m = _RELEASE_ITEM.match(raw)
    if m is None:
        raise FeatureSpecError(f"features: cannot read '{raw}': the forms are {FORMS}")
    dry, release = m.groups()
    if topology == "zk":
        raise FeatureSpecError(
            f"features: '{raw}': ZooKeeper mode has no metadata.version (KIP-778 is KRaft's)"
        )
    if _line(version) < RELEASE_VERSION_FROM:
        raise FeatureSpecError(
            f"features: '{raw}': kafka-features has --release-version from Kafka 4.0 on "
            f"(KIP-1022); the step runs on {version}"
        )
    try:
        line = _line(release)
    except ClusterError as exc:
        raise FeatureSpecError(f"features: '{raw}': {exc}") from None
    if not (3, 3) <= line <= _line(version):
        raise FeatureSpecError(
            f"features: '{raw}': a release from 3.3 (KRaft's first production metadata.version) "
            f"to {version} (the release the step runs on)"
        )
    return FeatureItem(RELEASE_VERSION, f"{line[0]}.{line[1]}", dry_run=bool(dry))


def release_line(version: str) -> str:
    """The ``--release-version`` a release's own upgrade finalizes: its line, as 4.1 for 4.1.2
    (MetadataVersion.fromVersionString takes a line to its newest production version)."""
    major, minor = _line(version)
    return f"{major}.{minor}"


def parse_version_mapping(text: str) -> dict[str, int]:
    """``kafka-features version-mapping --release-version X``'s answer: one ``name=level`` line
    a feature (``metadata.version=25 (4.0)`` for the first); {} when it says nothing readable."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z][a-z0-9._]*)=([0-9]+)\b", line.strip())
        if m:
            out[m[1]] = int(m[2])
    return out


class FeatureSpec(Protocol):
    """What the user's feature steps are planned from (history/options.py Values)."""

    features: str | None
    topology: str
    # Every release the run starts on or rolls to, first the one it starts on.
    releases: Sequence[str]


def feature_items(spec: FeatureSpec) -> list[FeatureItem]:
    """The spec's own feature steps; they run after every roll, so on the release the run ends
    on (the downgrade's, else the upgrade's, else the one it starts on)."""
    if not spec.features:
        return []
    return parse_features(spec.features, spec.releases[-1], spec.topology)


def window(upgrade: bool, downgrade: bool, migration: bool) -> tuple[float, float]:
    if migration:
        return WINDOWS["migration-upgrade" if upgrade else "migration"]
    if downgrade:
        return WINDOWS["downgrade"]
    return WINDOWS["upgrade" if upgrade else "alone"]


def times(
    rng: random.Random, time_limit: float, n: int, bounds: tuple[float, float]
) -> list[float]:
    """``n`` seeded start times spread over ``bounds`` of the time limit: one in each of n equal
    slots, so they come in order and never bunch at one end."""
    low, high = bounds
    slot = (high - low) / n
    return [
        round(time_limit * rng.uniform(low + i * slot, low + (i + 1) * slot), 3) for i in range(n)
    ]


_RELEASE_PROBE = """
public class ReleaseLevel {
  public static void main(String[] a) throws Exception {
    Class<?> c = Class.forName("org.apache.kafka.server.common.MetadataVersion");
    Object mv = c.getMethod("fromVersionString", String.class).invoke(null, a[0]);
    System.out.println(c.getMethod("featureLevel").invoke(mv) + " " + mv);
  }
}
"""


def release_level(classpath: str, workdir: Path, release: str) -> tuple[int, str]:
    """Release ``release``'s metadata.version (its level and name), as the MetadataVersion class
    on ``classpath`` (a newer release's jars) names it: the newest of that release's versions,
    as ``--metadata 4.0`` means to Kafka's own tool. Raises ValueError with what Java said."""
    probe = workdir / "ReleaseLevel.java"
    probe.write_text(_RELEASE_PROBE)
    try:
        done = subprocess.run(
            ["java", "-cp", classpath, str(probe), release],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"could not ask Java for {release}'s metadata.version: {exc}") from None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2 or not words[0].isdigit():
        said = (done.stderr.strip() or done.stdout.strip())[-300:]
        raise ValueError(f"no metadata.version for release {release}: {said}")
    return int(words[0]), words[1]
