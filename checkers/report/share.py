"""The report's share-group section (KIP-932): what the share consumers were handed and what
became of it, from the share workload's ops (docs/history.md, "The share workload").

Read in one pass over the history's share op rows into int64 arrays (no object per delivery),
so the section costs the same per delivery on a 20-second run and on an hours-long one:

- deliveries per record (the highest delivery count each record was handed with), and how many
  reached the brokers' delivery count limit and were not accepted then (archived by the share-
  partition leader);
- redeliveries, each by what came before it for that record in the history: an
  acknowledgement of some type sent, or nothing since its previous delivery (its lock expired,
  or its consumer closed or was cut off);
- lock expiries as the consumers saw them: records deliberately held past their lock, and late
  acknowledgements refused with InvalidRecordStateException;
- each consumer's deliveries per second through the run, with the faults shaded.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from history.columnar import read_header
from history.format import INVOKE, OK
from history.share import (
    ACCEPT,
    ACK_TYPES,
    SHARE_ACK,
    SHARE_FIELD,
    SHARE_FS,
    SHARE_POLL,
)

# What a refused late acknowledgement says (Kafka's InvalidRecordStateException): the lock had
# expired, and the record was no longer this consumer's.
LOCK_EXPIRED = "InvalidRecordStateException"
# Offsets below 2^40 and partitions below 2^23 make one int64 per record.
_OFFSET_BITS = 40
# Rows read at once: the section's memory is its arrays, not the history.
_BATCH_ROWS = 4096
# Consumers drawn one line each; the rest summed into one.
MAX_LINES = 12
# What a redelivery followed, in the section's order ("" : nothing since the last delivery).
_NOTHING = "nothing"


def _rec(key: int, offset: int) -> int:
    return (int(key) << _OFFSET_BITS) | int(offset)


@dataclass
class _Arrays:
    """The share ops as columns: deliveries, acknowledgements sent, outcomes heard."""

    d_rec: array = field(default_factory=lambda: array("q"))
    d_count: array = field(default_factory=lambda: array("q"))  # -1: not given
    d_time: array = field(default_factory=lambda: array("q"))  # the poll's completion
    d_proc: array = field(default_factory=lambda: array("q"))
    a_rec: array = field(default_factory=lambda: array("q"))
    a_type: array = field(default_factory=lambda: array("q"))  # index in ACK_TYPES
    a_time: array = field(default_factory=lambda: array("q"))  # the sending op's invocation
    a_proc: array = field(default_factory=lambda: array("q"))
    outcomes: Counter = field(default_factory=Counter)  # "ok" or the exception's class
    refused_by_proc: Counter = field(default_factory=Counter)
    held: int = 0
    procs: dict[Any, int] = field(default_factory=dict)

    def proc(self, p: Any) -> int:
        return self.procs.setdefault(p, len(self.procs))


def _scan(parquet: str | Path) -> _Arrays:
    out = _Arrays()
    pf = pq.ParquetFile(parquet)
    names = set(pf.schema_arrow.names)
    if "f" not in names:
        return out
    cols = ["type", "f", "process", "time", "value_json"]
    for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=cols):
        fs = batch.column(1).to_pylist()
        picked = [i for i, f in enumerate(fs) if f in SHARE_FS]
        if not picked:
            continue
        types, procs = batch.column(0).to_pylist(), batch.column(2).to_pylist()
        times, values = batch.column(3).to_pylist(), batch.column(4).to_pylist()
        for i in picked:
            if values[i] is None:
                continue
            _one(out, types[i], fs[i], procs[i], times[i], json.loads(values[i]))
    return out


def _list(value: dict[str, Any], name: str) -> list[Any]:
    got = value.get(name)
    return got if isinstance(got, list) else []


def _one(out: _Arrays, type_: str, f: str, process: Any, time: int, value: Any) -> None:
    if not isinstance(value, dict):
        return
    p = out.proc(process)
    if type_ == INVOKE and f in (SHARE_POLL, SHARE_ACK):
        for a in _list(value, "acks"):
            if isinstance(a, list) and len(a) == 3 and _ints(a[:2]) and a[2] in ACK_TYPES:
                out.a_rec.append(_rec(a[0], a[1]))
                out.a_type.append(ACK_TYPES.index(a[2]))
                out.a_time.append(time)
                out.a_proc.append(p)
        return
    if type_ != OK:
        return
    if f == SHARE_POLL:
        for r in _list(value, "records"):
            # The checks refuse a malformed record (history/share.py); the report skips it.
            if not (isinstance(r, list) and len(r) == 4 and _ints(r[:2]) and _int_or_none(r[3])):
                continue
            out.d_rec.append(_rec(r[0], r[1]))
            out.d_count.append(-1 if r[3] is None else int(r[3]))
            out.d_time.append(time)
            out.d_proc.append(p)
    if f == SHARE_ACK:
        out.held += len(_list(value, "held"))
        commit = value.get("commit") if isinstance(value.get("commit"), dict) else {}
        for a in _list(value, "acks"):
            said = commit.get(str(a[0])) if isinstance(a, list) and a else None
            if isinstance(said, str):
                _heard(out, p, said)
    if f in (SHARE_POLL, SHARE_ACK):
        for heard in _list(value, "acked"):
            if (
                isinstance(heard, list)
                and len(heard) == 3
                and isinstance(heard[1], list)
                and isinstance(heard[2], str)
            ):
                for _ in heard[1]:
                    _heard(out, p, heard[2])


def _ints(xs: list[Any]) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in xs)


def _int_or_none(x: Any) -> bool:
    return x is None or (isinstance(x, int) and not isinstance(x, bool))


def _heard(out: _Arrays, p: int, said: str) -> None:
    kind = "ok" if said == "ok" else said.split(":", 1)[0].rsplit(".", 1)[-1].strip()
    out.outcomes[kind] += 1
    if kind != "ok":
        out.refused_by_proc[p] += 1


def _np(a: array) -> np.ndarray:
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, dtype=np.int64)


@dataclass
class ShareSection:
    """What the report shows of a share run."""

    numbers: dict[str, Any]
    # One-second bins from 0 to the history's end, and each consumer's deliveries in them.
    edges: np.ndarray
    rates: dict[str, np.ndarray]


def load_share(parquet: str | Path, end_s: float) -> ShareSection | None:
    """The section of a history with share ops, read in one pass; None without any."""
    header = read_header(parquet).get(SHARE_FIELD)
    arrays = _scan(parquet)
    if not isinstance(header, dict) and not len(arrays.d_rec):
        return None
    header = header if isinstance(header, dict) else {}
    numbers = _numbers(arrays, int(header.get("delivery_limit") or 0), header)
    edges, rates = _per_consumer_rates(arrays, end_s)
    return ShareSection(numbers, edges, rates)


def _numbers(a: _Arrays, limit: int, header: dict[str, Any]) -> dict[str, Any]:
    d_rec, d_count, d_time = _np(a.d_rec), _np(a.d_count), _np(a.d_time)
    a_rec, a_type, a_time = _np(a.a_rec), _np(a.a_type), _np(a.a_time)
    records = np.unique(d_rec)
    # The highest delivery count each record was handed with.
    order = np.lexsort((d_count, d_rec))
    last_of = (
        np.r_[np.flatnonzero(np.diff(d_rec[order]) != 0), len(order) - 1] if len(order) else []
    )
    top = d_count[order][last_of] if len(order) else d_count
    hist = Counter(int(c) for c in top if c >= 0)
    counts = [{"count": c, "records": hist[c]} for c in sorted(hist)]
    archived = _archived(
        d_rec[order][last_of], top, d_time[order][last_of], a_rec, a_type, a_time, limit
    )
    after = _redelivered_after(d_rec, d_time, a_rec, a_type, a_time)
    redeliveries = len(d_rec) - len(records)
    rejected = len(np.unique(a_rec[a_type == ACK_TYPES.index("reject")])) if len(a_rec) else 0
    return {
        "deliveries": len(d_rec),
        "records": len(records),
        "redeliveries": redeliveries,
        "counted_above_one": int((d_count > 1).sum()),
        "limit": limit,
        "lock_ms": header.get("lock_ms"),
        "counts": counts,
        "reached_limit": int((top >= limit).sum()) if limit else 0,
        "archived_at_limit": archived,
        "rejected_records": rejected,
        "after": after,
        "held": a.held,
        "lock_expired_refusals": a.outcomes.get(LOCK_EXPIRED, 0),
        "outcomes": dict(a.outcomes.most_common()),
        "consumers": _consumers(a, d_count),
    }


def _archived(
    rec: np.ndarray,
    top: np.ndarray,
    at: np.ndarray,
    a_rec: np.ndarray,
    a_type: np.ndarray,
    a_time: np.ndarray,
    limit: int,
) -> int:
    """Records handed at the limit and not accepted afterwards: the broker archives a record
    whose last allowed delivery ends in a release, a rejection or an expired lock."""
    if not limit or not len(rec):
        return 0
    at_limit = top >= limit
    accepted = a_type == ACK_TYPES.index(ACCEPT)
    acc_rec, acc_time = a_rec[accepted], a_time[accepted]
    # The last ACCEPT sent for each record (after its limit delivery: accepted in time).
    latest: dict[int, int] = {}
    if len(acc_rec):
        o = np.lexsort((acc_time, acc_rec))
        ends = np.r_[np.flatnonzero(np.diff(acc_rec[o]) != 0), len(o) - 1]
        latest = dict(zip(acc_rec[o][ends].tolist(), acc_time[o][ends].tolist(), strict=True))
    n = 0
    for r, t in zip(rec[at_limit].tolist(), at[at_limit].tolist(), strict=True):
        if latest.get(r, -1) < t:
            n += 1
    return n


def _redelivered_after(
    d_rec: np.ndarray, d_time: np.ndarray, a_rec: np.ndarray, a_type: np.ndarray, a_time: np.ndarray
) -> dict[str, int]:
    """Each redelivery by the event just before it for its record, in history time: an
    acknowledgement of some type sent, or (``nothing``) another delivery with no acknowledgement
    sent since."""
    if not len(d_rec):
        return {}
    rec = np.concatenate([d_rec, a_rec])
    time = np.concatenate([d_time, a_time])
    # -1 marks a delivery; an acknowledgement is its type's index. At one time, the ack first.
    what = np.concatenate([np.full(len(d_rec), -1), a_type])
    o = np.lexsort((-what, time, rec))
    rec, what = rec[o], what[o]
    same = np.r_[False, rec[1:] == rec[:-1]]
    prev = np.r_[-2, what[:-1]]
    redelivered = (what == -1) & same
    before = prev[redelivered]
    out = {_NOTHING: int((before == -1).sum())}
    for i, t in enumerate(ACK_TYPES):
        out[t] = int((before == i).sum())
    return out


def _consumers(a: _Arrays, d_count: np.ndarray) -> list[dict[str, Any]]:
    d_proc, a_proc, a_type = _np(a.d_proc), _np(a.a_proc), _np(a.a_type)
    names = {i: p for p, i in a.procs.items()}
    rows = []
    for i in sorted(set(d_proc.tolist()) | set(a_proc.tolist())):
        mine = d_proc == i
        sent = a_type[a_proc == i]
        rows.append(
            {
                "process": names[i],
                "deliveries": int(mine.sum()),
                "redelivered": int((d_count[mine] > 1).sum()),
                **{t: int((sent == k).sum()) for k, t in enumerate(ACK_TYPES)},
                "refused": a.refused_by_proc.get(i, 0),
            }
        )
    return rows


def _per_consumer_rates(a: _Arrays, end_s: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Deliveries per second of each consumer process (MAX_LINES busiest, the rest summed):
    one-second bins from 0 to the history's end."""
    d_proc, d_time = _np(a.d_proc), _np(a.d_time)
    bins = max(1, int(np.ceil(max(end_s, 0.0))) + 1)
    edges = np.arange(bins, dtype=float)
    if not len(d_proc):
        return edges, {}
    sec = np.clip(d_time // 1_000_000_000, 0, bins - 1)
    names = {i: str(p) for p, i in a.procs.items()}
    totals = np.bincount(d_proc)
    busiest = [int(i) for i in np.argsort(-totals)[:MAX_LINES] if totals[i] > 0]
    out = {
        f"consumer {names[i]}": np.bincount(sec[d_proc == i], minlength=bins).astype(float)
        for i in sorted(busiest, key=lambda i: (len(names[i]), names[i]))
    }
    rest = ~np.isin(d_proc, busiest)
    if rest.any():
        out["other consumers"] = np.bincount(sec[rest], minlength=bins).astype(float)
    return edges, out
