"""The ELR checks of one run: its committed metadata log (replayed), its observer samples (each
broker's DescribeTopicPartitions), its acknowledged sends and its faults."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import Finding
from checkers.families.elr.observed import sample_overlaps, timeline, views_of
from checkers.families.elr.replay import Replayed, replay, topic_config
from checkers.families.elr.rules import elections, overlaps
from checkers.families.elr.watermark import advanced_below_min_isr, low_stretches
from checkers.families.metadata_log.check import MetadataLogRead
from checkers.families.metadata_log.committed import committed_of_cluster
from checkers.families.observer_samples import Sample
from checkers.scan.fault_windows import WALL, fault_windows

# How many rows of each timeline results.json's stats (and the report) keep.
TIMELINE_ROWS = 400
UNCLEAN = "unclean.leader.election.enable"
MIN_ISR = "min.insync.replicas"


@dataclass
class ElrResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


def committed_changes(replayed: Replayed, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Every committed partition record as the partition stood after it, at most `limit`."""
    rows = []
    for c in replayed.changes:
        a = c.after
        rows.append(
            {
                "offset": c.record.offset,
                "create_ms": c.record.create_ms,
                "record": c.record.type,
                "topic": replayed.topics.get(a.topic_id, a.topic_id),
                "partition": a.partition,
                "leader": a.leader,
                "leader_epoch": a.leader_epoch,
                "isr": list(a.isr),
                "elr": list(a.elr),
                "last_known_elr": list(a.last_known_elr),
            }
        )
    return rows[:limit], max(0, len(rows) - limit)


def check_elr(
    read: MetadataLogRead | None,
    cluster: dict[str, Any],
    generator: dict[str, Any] | None,
    samples: list[Sample],
    sends: Iterable[dict[str, Any]],
    fault_rows: list[dict[str, Any]],
) -> ElrResult:
    """`read`: the run's metadata/ as read (None: the run has none); `sends`: ok send/txn op
    rows with `wall` and `invoke_wall` (a list, or a metadata_log SendRows, read only inside
    the stretches judged); `fault_rows`: the nemesis, upgrade and migration op rows, every
    column."""
    out = ElrResult()
    views, errors = views_of(samples)
    if views:
        out.checked = True
        out.findings += sample_overlaps(views)
        rows, more = timeline(views, TIMELINE_ROWS)
        out.stats["sampled"] = {"changes": rows, "more": more, "views": len(views)}
        elr_seen = {(v.topic, v.partition) for v in views if v.elr}
        out.notes.append(
            f"ELR: {len(views)} partition views in brokers' DescribeTopicPartitions answers"
            + (f" ({errors} samples could not ask)" if errors else "")
            + f"; {len(elr_seen)} partitions shown with a non-empty ELR"
        )
    if read is None or read.error is not None or not read.voters:
        return out
    committed = committed_of_cluster(read.voters, cluster)
    if not committed:
        out.notes.append("ELR: nothing in the metadata logs is proven committed: not judged")
        return out
    replayed = replay(committed)
    out.checked = True
    from_start = committed[0].offset == 0

    def unclean_on(topic: str) -> bool:
        # kchaos renders unclean.leader.election.enable=false on every node (clusters/config.py)
        # and on its topic: only a committed ConfigRecord can turn it on.
        return (topic_config(replayed, topic, UNCLEAN) or "false").lower() == "true"

    out.findings += overlaps(replayed)
    out.findings += elections(replayed, unclean_on, from_start)
    rows, more = committed_changes(replayed, TIMELINE_ROWS)
    out.stats["committed"] = {"changes": rows, "more": more, "records": len(replayed.changes)}
    out.notes.append(_levels_note(replayed))
    if replayed.unknown_partitions:
        out.notes.append(
            f"ELR: {replayed.unknown_partitions} partition change records of partitions whose "
            "creation the committed log does not hold: not judged"
        )
    out.findings += _watermark(out, replayed, cluster, generator, sends, fault_rows)
    return out


def _levels_note(replayed: Replayed) -> str:
    if not replayed.elr_levels:
        return (
            "ELR: no committed eligible.leader.replicas.version record: the controllers kept no "
            "ELR (a release before 4.0, or the feature left off when the storage was formatted)"
        )
    said = ", ".join(f"{lv} at offset {o}" for o, lv in replayed.elr_levels)
    return f"ELR: eligible.leader.replicas.version committed as {said}"


def _watermark(
    out: ElrResult,
    replayed: Replayed,
    cluster: dict[str, Any],
    generator: dict[str, Any] | None,
    sends: Iterable[dict[str, Any]],
    fault_rows: list[dict[str, Any]],
) -> list[Finding]:
    topic = (generator or {}).get("topic")
    if not isinstance(topic, str):
        return []  # not the queue workload: no acknowledged sends to judge
    configured = topic_config(replayed, topic, MIN_ISR)
    planned = (generator or {}).get("min_insync_replicas")
    min_isr = int(configured) if configured and configured.isdigit() else planned
    if not isinstance(min_isr, int):
        out.notes.append(f"ELR: no min.insync.replicas for {topic}: the high watermark not judged")
        return []
    lows = low_stretches(replayed, topic, min_isr)
    out.stats["below_min_isr"] = len(lows)
    if not lows:
        return []
    names = [n["name"] for n in cluster.get("nodes") or [] if "name" in n]
    faults = fault_windows(fault_rows, names, WALL)
    if not faults.walls:
        out.notes.append("ELR: ops without a wall clock: the high watermark not judged")
        return []
    found, judged = advanced_below_min_isr(lows, sends, faults.spans)
    out.notes.append(
        f"ELR: {len(lows)} stretches of a partition of {topic} with its committed ISR below "
        f"min.insync.replicas {min_isr}; {judged} acknowledged sends fell inside their judged "
        "parts"
    )
    return found
