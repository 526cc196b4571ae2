"""Which file of a node a ``disk:corrupt`` step touches, and where: pure choices over what the
node's disk layer holds (docs/disk.md, "Corruption by file class").

A node's files are listed from its layer's backing directory (``find -printf``: path relative
to the mountpoint, size, allocated 512-byte blocks), so the names are the ones the layer's
``corrupt``, ``snapshot`` and ``rollback`` commands take. Every choice is drawn from a random
stream of the step's seed and the node's name (``node_stream``): the same seed picks the same
file, offset, mask or truncation point wherever the node's listing is the same, and the record
says what was picked and among how many.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Kafka's metadata log: its own classes, never a partition's.
METADATA_DIR = "__cluster_metadata-0"
# A partition directory (topic-partition) under the log directory, and a log-dir-level file.
_PARTITION = re.compile(r"^data/(?P<dir>(?P<topic>.+)-(?P<partition>\d+))/(?P<name>[^/]+)$")
_LOG_DIR_FILE = re.compile(r"^data/(?P<name>[^/]+)$")
_SEGMENT = re.compile(r"^\d{20}\.log$")
_INDEX = re.compile(r"^\d{20}\.index$")
_PRODUCER_SNAPSHOT = re.compile(r"^\d{20}\.snapshot$")
_METADATA_SNAPSHOT = re.compile(r"^\d{20}-\d{10}\.checkpoint$")
# Kafka adds an offset index entry (8 bytes) after every index.interval.bytes (4096 by default)
# of log; the rest of a preallocated index is zeros Kafka never reads.
INDEX_INTERVAL_BYTES = 4096
INDEX_ENTRY_BYTES = 8


@dataclass(frozen=True)
class FileClass:
    name: str
    meaning: str
    # When Kafka reads it: "always" (while it runs) or "startup" (loading the log, the
    # checkpoints, the quorum state): a corruption of the latter shows only at a restart.
    read: str
    partition_level: bool  # one per partition directory (the choice prefers the run's topic)


CLASSES: tuple[FileClass, ...] = (
    FileClass("log", "a partition's segment (NNN.log)", "always", True),
    FileClass("index", "a segment's offset index (NNN.index, memory-mapped)", "always", True),
    FileClass("leader-epoch-checkpoint", "a partition's leader-epoch-checkpoint", "startup", True),
    FileClass(
        "replication-offset-checkpoint",
        "the log dir's high watermarks (replication-offset-checkpoint)",
        "startup",
        False,
    ),
    FileClass(
        "recovery-point-offset-checkpoint",
        "the log dir's recovery points (recovery-point-offset-checkpoint)",
        "startup",
        False,
    ),
    FileClass("partition.metadata", "a partition's topic id (partition.metadata)", "startup", True),
    FileClass(
        "producer-snapshot", "a partition's producer-state snapshot (NNN.snapshot)", "startup", True
    ),
    FileClass("metadata-log", "a __cluster_metadata segment (NNN.log)", "always", False),
    FileClass(
        "metadata-snapshot",
        "a __cluster_metadata snapshot (NNN-EEE.checkpoint)",
        "startup",
        False,
    ),
    FileClass(
        "quorum-state",
        "the KRaft quorum state (__cluster_metadata-0/quorum-state)",
        "startup",
        False,
    ),
    FileClass("meta.properties", "the log dir's meta.properties", "startup", False),
)
CLASS_NAMES = tuple(c.name for c in CLASSES)
BY_NAME = {c.name: c for c in CLASSES}


@dataclass(frozen=True)
class Listed:
    """One regular file under a node's mountpoint, as ``find -printf '%P\\t%s\\t%b\\n'`` says."""

    path: str  # relative to the mountpoint: what the layer's commands take
    size: int
    blocks: int  # 512-byte blocks allocated


def parse_listing(text: str) -> list[Listed]:
    """The lines of ``find ROOT -type f -printf '%P\\t%s\\t%b\\n'``; others are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            out.append(Listed(parts[0], int(parts[1]), int(parts[2])))
    return sorted(out, key=lambda f: f.path)


def class_of(path: str) -> str | None:
    """The file class a path under a Kafka node's mountpoint belongs to, if any."""
    m = _PARTITION.match(path)
    if m is not None:
        name, metadata = m["name"], m["dir"] == METADATA_DIR
        if metadata:
            if _SEGMENT.match(name):
                return "metadata-log"
            if _METADATA_SNAPSHOT.match(name):
                return "metadata-snapshot"
            return "quorum-state" if name == "quorum-state" else None
        if _SEGMENT.match(name):
            return "log"
        if _INDEX.match(name):
            return "index"
        if _PRODUCER_SNAPSHOT.match(name):
            return "producer-snapshot"
        if name in ("leader-epoch-checkpoint", "partition.metadata"):
            return name
        return None
    m = _LOG_DIR_FILE.match(path)
    if m is not None and m["name"] in (
        "replication-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "meta.properties",
    ):
        return m["name"]
    return None


def partition_of(path: str) -> tuple[str, int] | None:
    """(topic, partition) of a file in a partition directory; None for any other."""
    m = _PARTITION.match(path)
    if m is None or m["dir"] == METADATA_DIR:
        return None
    return m["topic"], int(m["partition"])


def node_stream(seed: int, node: str) -> random.Random:
    """The step's choices on one node: its own stream, so that another node's files (or whether
    another target was running) never move what this one picks."""
    return random.Random(f"kchaos/disk-corrupt/{seed}/{node}")


@dataclass(frozen=True)
class Chosen:
    file: Listed
    among: int  # how many files of the class the node had to choose from
    preferred: str  # which of them the choice was made among (the preference it met)


def choose_file(
    files: list[Listed],
    file_class: str,
    rng: random.Random,
    topic: str | None,
    led: frozenset[int],
    need_bytes: bool,
) -> Chosen | None:
    """One file of ``file_class``, drawn with ``rng``; None when the node has none.

    A partition-level class prefers, in order, partitions of the run's ``topic`` this node
    leads (``led``, from the workload's hints: what a consumer is served from), any partition of
    that topic, any partition of a topic not internal to Kafka, and then any. ``need_bytes``:
    only non-empty files (a flip or a truncation needs a byte to touch).
    """
    of_class = [
        f for f in files if class_of(f.path) == file_class and (f.size > 0 or not need_bytes)
    ]
    if not of_class:
        return None
    tiers: list[tuple[str, list[Listed]]] = [("any", of_class)]
    if BY_NAME[file_class].partition_level:

        def tier(keep: Callable[[str, int], bool]) -> list[Listed]:
            return [f for f in of_class if (tp := partition_of(f.path)) and keep(*tp)]

        tiers = [
            ("a partition of the run's topic it leads", tier(lambda t, p: t == topic and p in led)),
            ("a partition of the run's topic", tier(lambda t, p: t == topic)),
            ("a partition of a topic not internal to Kafka", tier(lambda t, p: t[:2] != "__")),
            *tiers,
        ]
    preferred, pool = next((why, pool) for why, pool in tiers if pool)
    return Chosen(rng.choice(pool), len(of_class), preferred)


def extent(chosen: Listed, files: list[Listed]) -> int:
    """The bytes of the file Kafka reads: all of it, but for an offset index only the entries
    its segment's size can have (Kafka preallocates indexes, mostly zeros it never reads)."""
    if class_of(chosen.path) != "index":
        return chosen.size
    log_path = chosen.path[: -len(".index")] + ".log"
    log = next((f for f in files if f.path == log_path), None)
    if log is None:
        return chosen.size
    entries = math.ceil(log.size / INDEX_INTERVAL_BYTES) + 1
    return max(1, min(chosen.size, entries * INDEX_ENTRY_BYTES))


def flip_at(rng: random.Random, size: int) -> tuple[int, int]:
    """(offset, mask) of one bit flip in the first ``size`` bytes."""
    return rng.randrange(size), 1 << rng.randrange(8)


def truncate_to(rng: random.Random, size: int) -> int:
    """A length shorter than ``size``: the file is cut there."""
    return rng.randrange(size)


def described(chosen: Chosen) -> dict[str, Any]:
    """What the record says of the file picked."""
    out: dict[str, Any] = {
        "path": chosen.file.path,
        "size": chosen.file.size,
        "among": chosen.among,
        "preferred": chosen.preferred,
    }
    tp = partition_of(chosen.file.path)
    if tp is not None:
        out["topic"], out["partition"] = tp
    return out
