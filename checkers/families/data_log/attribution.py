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

from checkers.families.data_log.log import Batch, DataLog, distinct
from checkers.families.data_log.sends import Sends, send_mops
from checkers.families.metadata_log.parse import Record
from checkers.families.metadata_log.rules import NO_LEADER_CHANGE

# Acknowledged writes looked up at a time: the lookups' temporaries stay a few tens of MB.
CHUNK = 1 << 20


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
    them all. The acknowledged writes are looked up in every log CHUNK at a time, so that what
    is held beside the logs is a chunk's arrays and the writes not attributed."""
    if not isinstance(sends, Sends):
        sends = Sends.from_rows(sends)
    # Who led each (partition, epoch): the committed log's few leaderships, packed and sorted,
    # so that a write's is one search.
    lead_of = [lead for epochs in leaders.values() for lead in epochs.values()]
    led = np.array(
        [(p << 32) | (e & 0xFFFFFFFF) for p, epochs in leaders.items() for e in epochs],
        dtype=np.int64,
    )
    by_led = np.argsort(led)
    led = led[by_led]
    kept_ops = None if keep is None else np.fromiter(keep, np.int64)
    acked = sends.acked
    # Whether some log holds a write, and in which epochs: a log holding an earlier one's
    # batches and records again changes neither.
    unique = distinct(logs)
    result = Attributions({}, [], [])
    unplaced, ambiguous = [], []
    n_ambiguous = 0
    last_placed = None  # the last op counted in n_placed (ops come in history order)
    for lo in range(0, len(acked), CHUNK):
        rows_of = acked[lo : lo + CHUNK]
        op, key = sends.op[rows_of], sends.key[rows_of]
        offset, value = sends.offset[rows_of], sends.value[rows_of]
        # Over the logs holding the write: how many, and their leader epochs (one or several).
        count = np.zeros(len(op), dtype=np.int8)
        epoch = np.zeros(len(op), dtype=np.int64)
        mixed = np.zeros(len(op), dtype=bool)
        for log in unique:
            records, rows = log.locate(key, offset)
            there = log.holds(records, value)
            mine = log.leader_epoch[np.where(there, rows, 0)] if len(log) else epoch
            mixed |= there & (count > 0) & (mine != epoch)
            epoch = np.where(there & (count == 0), mine, epoch)
            count += there
        unplaced.append(op[count == 0])
        wanted = (key << 32) | (epoch & 0xFFFFFFFF)
        at = np.clip(np.searchsorted(led, wanted), 0, max(len(led) - 1, 0))
        placed = (count > 0) & ~mixed
        placed &= led[at] == wanted if len(led) else False
        odd = np.flatnonzero((count > 0) & ~placed)
        n_ambiguous += len(odd)
        ambiguous += [(int(op[i]), int(key[i]), int(offset[i]), int(value[i])) for i in odd[:5]]
        ops = op[placed]
        if len(ops):
            fresh = np.ones(len(ops), dtype=bool)
            fresh[1:] = ops[1:] != ops[:-1]
            fresh[0] = ops[0] != last_placed
            result.n_placed += int(np.count_nonzero(fresh))
            last_placed = ops[-1]
        kept = placed if kept_ops is None else placed & np.isin(op, kept_ops)
        for i in np.flatnonzero(kept).tolist():
            k, o, v = int(key[i]), int(offset[i]), int(value[i])
            lead = lead_of[int(by_led[at[i]])]
            batch = _holding(logs, k, o, v)[0]
            result.placed.setdefault(int(op[i]), []).append(
                Attribution(int(op[i]), k, o, v, batch, lead)
            )
    result.unplaced = sorted(set(np.concatenate(unplaced).tolist())) if unplaced else []
    if n_ambiguous:
        shown = []
        for op_, k, o, v in ambiguous[:5]:
            cites = ", ".join(sorted(b.cite() for b in _holding(logs, k, o, v)))
            shown.append(f"op {op_} (key {k} offset {o}): {cites}")
        result.notes.append(
            f"data logs: {n_ambiguous} acknowledged writes not attributed to a leader "
            "(copies in different leader epochs, or an epoch the committed metadata log does "
            "not name): " + "; ".join(shown) + (" …" if n_ambiguous > 5 else "")
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
