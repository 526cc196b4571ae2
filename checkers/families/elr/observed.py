"""What each broker said of its partitions: the observer's DescribeTopicPartitions answers
(`partitions` in a broker's sample, docs/history.md), a broker's metadata cache as it stood.

A broker's cache is the committed metadata it has applied, so what holds of every committed
record holds of each answer: no broker in both the ISR and the ELR (`elr-isr-overlap`, judged
here per sample as well). Everything else a sample says may lag the controller's log, so it is
shown (the report, results.json's stats), not held to the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers.core.findings import Finding
from checkers.families.elr.rules import RULES
from checkers.families.observer_samples import Sample


@dataclass(frozen=True)
class View:
    """One partition as one broker's sample showed it."""

    sample: Sample
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...] | None  # None: the broker sent null
    last_known_elr: tuple[int, ...] | None


def _ints(x: Any) -> tuple[int, ...] | None:
    if not isinstance(x, list) or not all(isinstance(i, int) for i in x):
        return None
    return tuple(x)


def views_of(samples: list[Sample]) -> tuple[list[View], int]:
    """Every partition of every sample that carries `partitions`, in sample order; and how many
    samples said `partitions_error` instead."""
    out, errors = [], 0
    for s in samples:
        if "partitions_error" in s.value:
            errors += 1
        parts = s.value.get("partitions")
        if not isinstance(parts, list):
            continue
        for p in parts:
            if not isinstance(p, dict) or p.get("error") not in (0, None):
                continue
            topic, index = p.get("topic"), p.get("partition")
            leader, epoch, isr = p.get("leader"), p.get("leader_epoch"), _ints(p.get("isr"))
            if not isinstance(topic, str) or not isinstance(index, int) or isr is None:
                continue
            out.append(
                View(
                    s,
                    topic,
                    index,
                    leader if isinstance(leader, int) else -1,
                    epoch if isinstance(epoch, int) else -1,
                    isr,
                    _ints(p.get("elr")),
                    _ints(p.get("last_known_elr")),
                )
            )
    return out, errors


def sample_overlaps(views: list[View]) -> list[Finding]:
    """A broker's answer with a broker in both the ISR and the ELR: one finding per broker and
    partition (its first such sample), with the count of the others."""
    out: list[Finding] = []
    seen: dict[tuple[str, str, int], Finding] = {}
    rule = RULES["elr-isr-overlap"]
    for v in views:
        both = sorted(set(v.isr) & set(v.elr or ()))
        if not both:
            continue
        key = (v.sample.node, v.topic, v.partition)
        if key in seen:
            seen[key].data["more"] += 1
            continue
        f = Finding(
            "elr-isr-overlap",
            None,
            (v.sample.index,),
            f"{v.sample.node} answered DescribeTopicPartitions in {v.sample.cite()} with "
            f"partition {v.topic}-{v.partition} holding broker(s) {both} in both its ISR "
            f"{list(v.isr)} and its ELR {list(v.elr or ())} (leader {v.leader}, epoch "
            f"{v.leader_epoch}). Rule: {rule}",
            {
                "rule": rule,
                "node": v.sample.node,
                "topic": v.topic,
                "partition": v.partition,
                "brokers": both,
                "more": 0,
            },
        )
        seen[key] = f
        out.append(f)
    return out


def timeline(views: list[View], limit: int) -> tuple[list[dict[str, Any]], int]:
    """Each broker's view of each partition whenever it changed (leader, epoch, ISR, ELR, last
    known ELR), at most `limit` rows in time order; and how many more changes there were."""
    last: dict[tuple[str, str, int], tuple[Any, ...]] = {}
    rows: list[dict[str, Any]] = []
    for v in views:
        key = (v.sample.node, v.topic, v.partition)
        shown = (v.leader, v.leader_epoch, v.isr, v.elr, v.last_known_elr)
        if last.get(key) == shown:
            continue
        last[key] = shown
        rows.append(
            {
                "time_s": round(v.sample.time / 1e9, 3),
                "op": v.sample.index,
                "broker": v.sample.node,
                "topic": v.topic,
                "partition": v.partition,
                "leader": v.leader,
                "leader_epoch": v.leader_epoch,
                "isr": list(v.isr),
                "elr": None if v.elr is None else list(v.elr),
                "last_known_elr": None if v.last_known_elr is None else list(v.last_known_elr),
            }
        )
    return rows[:limit], max(0, len(rows) - limit)
