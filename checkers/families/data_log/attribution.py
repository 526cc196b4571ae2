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

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from checkers.families.data_log.log import Batch, DataLog
from checkers.families.data_log.sends import Sends, send_mops
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


def acked_writes(op: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(key, offset, value) of an ok send/txn completion's sends whose offset is known."""
    out = []
    for _, key, ov in send_mops(op):
        if isinstance(ov, list) and len(ov) == 2 and all(isinstance(x, int) for x in ov):
            out.append((key, ov[0], ov[1]))
    return out


def attribute(
    sends: Sends | Iterable[dict[str, Any]],
    logs: dict[str, DataLog],
    leaders: dict[int, dict[int, Leadership]],
    keep: Collection[int] | None = None,
) -> Attributions:
    """`sends`: the history's sends (or ok send/txn completions as op rows). Only the ops in
    `keep` (every one, without it) have their attributions kept in `placed`; `n_placed` counts
    them all. Every acknowledged write is looked up in every log at once."""
    if not isinstance(sends, Sends):
        sends = Sends.from_rows(sends)
    acked = sends.acked
    op, key = sends.op[acked], sends.key[acked]
    offset, value = sends.offset[acked], sends.value[acked]
    n = len(acked)
    # Over the logs holding the write: how many, their lowest and highest leader epoch, and
    # the first of them (log order) with its batch row.
    count = np.zeros(n, dtype=np.int64)
    low = np.full(n, np.iinfo(np.int64).max)
    high = np.full(n, np.iinfo(np.int64).min)
    first_log = np.full(n, -1, dtype=np.int64)
    first_row = np.full(n, -1, dtype=np.int64)
    names = list(logs)
    for li, log in enumerate(logs.values()):
        rows = log.batches_at(key, offset)
        there = log.holds(log.records_at(rows, offset), value)
        epoch = log.leader_epoch[np.where(there, rows, 0)] if len(log) else np.zeros(n, int)
        count += there
        low = np.where(there, np.minimum(low, epoch), low)
        high = np.where(there, np.maximum(high, epoch), high)
        new = there & (first_log < 0)
        first_log[new], first_row[new] = li, rows[new]
    result = Attributions({}, [], [])
    result.unplaced = sorted(set(op[count == 0].tolist()))
    one = (count > 0) & (low == high)
    lead_of: dict[tuple[int, int], Leadership | None] = {}
    for k, e in set(zip(key[one].tolist(), low[one].tolist(), strict=True)):
        lead_of[(k, e)] = leaders.get(k, {}).get(e)
    placed = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(one).tolist():
        placed[i] = lead_of[(int(key[i]), int(low[i]))] is not None
    result.n_placed = len(np.unique(op[placed]))
    ambiguous = np.flatnonzero((count > 0) & ~placed)
    if len(ambiguous):
        shown = []
        for i in ambiguous[:5].tolist():
            k, o, v = int(key[i]), int(offset[i]), int(value[i])
            cites = ", ".join(sorted(b.cite() for b in _holding(logs, k, o, v)))
            shown.append(f"op {int(op[i])} (key {k} offset {o}): {cites}")
        result.notes.append(
            f"data logs: {len(ambiguous)} acknowledged writes not attributed to a leader "
            "(copies in different leader epochs, or an epoch the committed metadata log does "
            "not name): " + "; ".join(shown) + (" …" if len(ambiguous) > 5 else "")
        )
    kept = placed if keep is None else placed & np.isin(op, np.fromiter(keep, np.int64))
    for i in np.flatnonzero(kept).tolist():
        lead = lead_of[(int(key[i]), int(low[i]))]
        assert lead is not None
        batch = logs[names[int(first_log[i])]].batch(int(first_row[i]))
        result.placed.setdefault(int(op[i]), []).append(
            Attribution(int(op[i]), int(key[i]), int(offset[i]), int(value[i]), batch, lead)
        )
    return result


def _holding(logs: dict[str, DataLog], key: int, offset: int, value: int) -> list[Batch]:
    """The batches holding the value at the offset, one per log that does."""
    out = []
    for log in logs.values():
        b = log.batch_at(key, offset)
        if b is not None and b.payloads.get(offset) == str(value):
            out.append(b)
    return out
