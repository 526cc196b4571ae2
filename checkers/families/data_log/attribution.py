"""Which broker appended each acknowledged send, from the final data logs and the committed
metadata log.

An ok send says (key, offset, value). The batch holding that offset with that payload in a
broker's final log carries the partitionLeaderEpoch the appending leader stamped on it; the
committed metadata log says who led the partition in that epoch (a PartitionRecord states leader
and leaderEpoch; each PartitionChangeRecord that names a leader starts the next epoch, Kafka's
PartitionRegistration.merge). That broker, as leader, appended the write while the send was in
flight. A send found in no final log, or in batches of different epochs, is not attributed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from checkers.families.data_log.parse import Batch, DataLog
from checkers.families.metadata_log.parse import Record
from checkers.families.metadata_log.rules import NO_LEADER_CHANGE


@dataclass(frozen=True)
class Leadership:
    broker: int  # -1: no leader in this epoch
    epoch: int
    record: Record  # the committed record that started the epoch


@dataclass(frozen=True)
class Attribution:
    op: int
    key: int
    offset: int
    value: int
    batch: Batch
    leader: Leadership


@dataclass
class Attributions:
    placed: dict[int, list[Attribution]]  # op index -> its writes' attributions (kept ones)
    unplaced: list[int]  # ok ops with a write in no final log (or at no known offset)
    notes: list[str]
    n_placed: int = 0  # ops with a write attributed, kept or not


def partition_leaders(committed: list[Record], topic: str) -> dict[int, dict[int, Leadership]]:
    """partition -> leader epoch -> who led, for the topic's newest incarnation."""
    topic_id: str | None = None
    out: dict[int, dict[int, Leadership]] = {}
    for r in committed:
        if r.control:
            continue
        kind, d = r.type, r.data
        if kind == "TOPIC_RECORD" and d.get("name") == topic:
            topic_id, out = d.get("topicId"), {}
            continue
        if topic_id is None or d.get("topicId") != topic_id:
            continue
        p = d.get("partitionId")
        if not isinstance(p, int):
            continue
        epochs = out.setdefault(p, {})
        if kind == "PARTITION_RECORD" and isinstance(d.get("leaderEpoch"), int):
            epochs[d["leaderEpoch"]] = Leadership(d.get("leader", -1), d["leaderEpoch"], r)
        elif kind == "PARTITION_CHANGE_RECORD" and epochs:
            leader = d.get("leader", NO_LEADER_CHANGE)
            if leader != NO_LEADER_CHANGE:
                epoch = max(epochs) + 1
                epochs[epoch] = Leadership(leader, epoch, r)
    return out


def send_mops(op: dict[str, Any]) -> list[list[Any]]:
    """The send micro-ops of an op row (`value`, or `value_json` in columnar rows)."""
    value = op.get("value")
    if value is None and op.get("value_json") is not None:
        value = json.loads(op["value_json"])
    if not isinstance(value, list):
        return []
    return [m for m in value if isinstance(m, list) and len(m) == 3 and m[0] == "send"]


def acked_writes(op: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(key, offset, value) of an ok send/txn completion's sends whose offset is known."""
    out = []
    for _, key, ov in send_mops(op):
        if isinstance(ov, list) and len(ov) == 2 and all(isinstance(x, int) for x in ov):
            out.append((key, ov[0], ov[1]))
    return out


def attribute(
    sends: Iterable[dict[str, Any]],
    logs: dict[str, DataLog],
    leaders: dict[int, dict[int, Leadership]],
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> Attributions:
    """`sends`: ok send/txn completions (`index`, `value` or `value_json`). Only the ops `keep`
    accepts (every one, without it) have their attributions kept in `placed`; `n_placed`
    counts them all."""
    result = Attributions({}, [], [])
    ambiguous: list[str] = []
    for op in sends:
        placed = False
        kept = keep is None or keep(op)
        for key, offset, value in acked_writes(op):
            held = [
                b
                for log in logs.values()
                if (b := log.batch_at(key, offset)) is not None
                and b.payloads.get(offset) == str(value)
            ]
            epochs = {b.leader_epoch for b in held}
            if not held:
                result.unplaced.append(op["index"])
                continue
            lead = leaders.get(key, {}).get(epochs.pop()) if len(epochs) == 1 else None
            if lead is None:
                shown = ", ".join(sorted(b.cite() for b in held))
                ambiguous.append(f"op {op['index']} (key {key} offset {offset}): {shown}")
                continue
            placed = True
            if kept:
                result.placed.setdefault(op["index"], []).append(
                    Attribution(op["index"], key, offset, value, held[0], lead)
                )
        result.n_placed += placed
    if ambiguous:
        result.notes.append(
            f"data logs: {len(ambiguous)} acknowledged writes not attributed to a leader "
            "(copies in different leader epochs, or an epoch the committed metadata log does "
            "not name): " + "; ".join(ambiguous[:5]) + (" …" if len(ambiguous) > 5 else "")
        )
    result.unplaced = sorted(set(result.unplaced))
    return result
