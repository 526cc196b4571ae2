"""Which offsets of the metadata log are proven committed, from the logs and observer samples.

Only below that bound may controllers' logs be held to agree: above it a deposed leader may
legitimately hold entries the next leader overwrites ("this future state may never be
committed", KIP-631).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from checkers.families.metadata_log.parse import MetadataLog, Record


@dataclass(frozen=True)
class CommittedBound:
    last: int  # highest committed offset (-1: nothing proven)
    why: str
    # The logs holding the majority's entry at `last`: by Raft's log matching each holds the
    # committed log up to it (empty when the bound comes from a high watermark).
    holders: tuple[str, ...] = ()


def majority_bound(logs: dict[str, MetadataLog], voters: int) -> CommittedBound:
    """Highest offset whose entry, written in the newest epoch any log holds, a majority holds.

    Raft's commit rule: an entry of the current leader's epoch stored on a majority is in every
    later leader's log (a voter refuses a candidate whose log is less up to date). Entries of
    older epochs are never counted this way (Raft's figure 8), only covered by a later one.
    """
    need = voters // 2 + 1
    epoch = max((r.epoch for log in logs.values() for r in log.records.values()), default=-1)
    best = CommittedBound(-1, "no entry of the newest epoch is held by a majority")
    offsets = sorted(
        {o for log in logs.values() for o, r in log.records.items() if r.epoch == epoch}
    )
    for offset in offsets:
        copies = Counter(
            (r.create_ms, r.text)
            for log in logs.values()
            if (r := log.records.get(offset)) is not None and r.epoch == epoch
        )
        if copies and copies.most_common(1)[0][1] >= need:
            entry = copies.most_common(1)[0][0]
            holders = tuple(
                n
                for n, log in sorted(logs.items())
                if (r := log.records.get(offset)) is not None
                and (r.epoch, r.create_ms, r.text) == (epoch, *entry)
            )
            best = CommittedBound(
                offset,
                f"offset {offset} (epoch {epoch}, the newest) is held alike by "
                f"{len(holders)} of {voters} voters",
                holders,
            )
    return best


def committed_log(logs: dict[str, MetadataLog], majority: CommittedBound) -> list[Record]:
    """The committed entries up to `majority.last`, in offset order, each from a log that holds
    the majority's entry at that bound (never from a follower's stale tail)."""
    out = []
    for offset in range(majority.last + 1):
        for name in majority.holders:
            if (r := logs[name].records.get(offset)) is not None:
                out.append(r)
                break
    return out


def committed_bound(
    logs: dict[str, MetadataLog], voters: int, high_watermark: int | None
) -> CommittedBound:
    """The larger of the majority bound and an observed high watermark (exclusive in Kafka)."""
    return with_watermark(majority_bound(logs, voters), high_watermark)


def with_watermark(majority: CommittedBound, high_watermark: int | None) -> CommittedBound:
    """`majority`, or the bound an observed high watermark proves when that is higher."""
    if high_watermark is not None and high_watermark - 1 > majority.last:
        return CommittedBound(
            high_watermark - 1, f"an observer sample reported high watermark {high_watermark}"
        )
    return majority


def committed_of_cluster(voters: dict[str, MetadataLog], cluster: dict[str, Any]) -> list[Record]:
    """The records a majority of the controllers' logs prove committed: the voters' logs of the
    nodes the cluster file names as controllers (all of them when it names none)."""
    controllers = [
        n["name"]
        for n in cluster.get("nodes") or []
        if "controller" in (n.get("roles") or []) and "name" in n
    ]
    logs = {n: log for n, log in voters.items() if not controllers or n in controllers}
    return committed_log(logs, majority_bound(logs, len(controllers) or len(logs)))
