"""Records a consumer was given during the run that no final read returned and no replica's
final log holds: `lost-committed-record`, in runs without a power loss (issue 29).

A record a consumer read was committed: Kafka's design says "Only committed messages are ever
given out to the consumer" (a consumer fetches below the high watermark), and "a message is
considered committed when all replicas in the ISR for that partition have applied it to their
log". Its promise for a committed record is "The guarantee that Kafka offers is that a
committed message will not be lost, as long as there is at least one in sync replica alive, at
all times". Kill, pause, partition, clock and packet faults leave every replica's disk whole, so
the record is in some replica's final log or the guarantee was broken. The queue's rules do not
see such a record: it was read (so it is neither `lost-write` nor `unseen`), and it need not have
been acknowledged (a send that timed out may still have been committed and read).

Judged only where the run's final logs are whole: every broker's log of the topic decoded
without a cut (a replica outside the ISR counts: the record is looked for anywhere). Runs with a
power loss keep lost.py's judgement of their lost writes (an acknowledged write a consumer read
and no final log holds is judged there against the power losses). Values no send of the run
wrote are the queue's `garbage-read`, not looked for here. Where unclean leader elections were
allowed (the header, or a committed ConfigRecord), such a loss is documented: tolerated, with
Kafka's words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from checkers.core.findings import Finding
from checkers.families.data_log.log import DataLog
from checkers.families.durability.reads import FinalReads
from history.columnar import element_row_groups, read_element_row_group

LOST_COMMITTED = "lost-committed-record"
KINDS = (LOST_COMMITTED,)
GIVEN = (
    'Kafka\'s design: "Only committed messages are ever given out to the consumer"; "a message '
    "is considered committed when all replicas in the ISR for that partition have applied it to "
    'their log"'
)
KEPT = (
    "Kafka's design: \"The guarantee that Kafka offers is that a committed message will not be "
    'lost, as long as there is at least one in sync replica alive, at all times"'
)
RULE = (
    "a record a consumer was given is committed, and a committed record is not lost without a "
    f"fault that destroys what disks hold: {GIVEN}; {KEPT}"
)
UNCLEAN = (
    'unclean.leader.election.enable: "Indicates whether to enable replicas not in the ISR set '
    'to be elected as leader as a last resort, even though doing so may result in data loss"'
)
SHOWN = 8


@dataclass
class Polled:
    """Records polls returned (ok or not: a poll's records were delivered), as arrays; `read`:
    how many poll records the history holds, of which `keep` chose these."""

    key: np.ndarray
    offset: np.ndarray
    value: np.ndarray
    op: np.ndarray
    read: int = 0

    @classmethod
    def from_parquet(cls, path: str | Path, keep: Keep | None = None) -> Polled:
        """A row group at a time; `keep(key, value)` says which records to hold (all: None),
        so that what is held is what a rule needs, never every poll of a long history."""
        parts = []
        read = 0
        for i in element_row_groups(path):
            rg = read_element_row_group(path, i, ["kind", "key", "offset", "value", "index"])
            valid = pc.and_(
                pc.equal(rg.column("kind"), "poll"),
                pc.and_(pc.is_valid(rg.column("offset")), pc.is_valid(rg.column("value"))),
            )
            rg = rg.filter(pc.fill_null(valid, False))
            if not rg.num_rows:
                continue
            read += rg.num_rows
            cols = [np.asarray(rg.column(c).to_numpy(), np.int64)
                    for c in ("key", "offset", "value", "index")]  # fmt: skip
            if keep is not None:
                m = keep(cols[0], cols[2])
                cols = [c[m] for c in cols]
            if len(cols[0]):
                parts.append(cols)
        if not parts:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, empty, read)
        key, offset, value, op = (np.concatenate(c) for c in zip(*parts, strict=True))
        return cls(key, offset, value, op, read)


Keep = Callable[[np.ndarray, np.ndarray], np.ndarray]


def not_held(held: dict[int, np.ndarray]) -> Keep:
    """A `keep` for records no final log holds (`held`: held_by_key's)."""

    def keep(key: np.ndarray, value: np.ndarray) -> np.ndarray:
        m = np.ones(len(key), bool)
        for k in np.unique(key).tolist():
            at = key == k
            m[at] = ~np.isin(value[at], held.get(k, np.zeros(0, np.int64)))
        return m

    return keep


def whole_logs_why(logs: dict[str, DataLog], brokers: list[str]) -> str:
    """Why the final logs cannot say a record is in none of them; '' when they can."""
    if not logs:
        return "the run has no readable data logs"
    if not brokers:
        return "cluster.json names no brokers"
    missing = [b for b in brokers if b not in logs]
    if missing:
        return f"no data log of {', '.join(missing)}"
    cut = sorted({n for log in logs.values() for n in log.notes})
    return f"a data log could not be read whole ({cut[0]})" if cut else ""


def held_by_key(logs: dict[str, DataLog]) -> dict[int, np.ndarray]:
    """Per partition, every value any broker's final log holds of it (odd payloads left out)."""
    out: dict[int, list[np.ndarray]] = {}
    for log in logs.values():
        for p in log.partition_ids:
            r = log.rows_of(p)
            if not len(r):
                continue
            lo = int(log.first[r.start])
            hi = int(log.first[r.stop - 1] + log.n[r.stop - 1])
            vals = log.values[lo:hi]
            if log.odd_mask is not None:
                vals = vals[~log.odd_mask[lo:hi]]
            out.setdefault(int(p), []).append(vals)
    return {p: np.unique(np.concatenate(v)) for p, v in out.items()}


def polled_then_gone(
    polled: Polled,
    held: dict[int, np.ndarray],
    final: FinalReads | None,
    sent: np.ndarray,
    unclean: bool,
) -> list[Finding]:
    """One `lost-committed-record` per partition whose polled records (values some send wrote)
    no final read returned and no broker's final log holds."""
    ours = np.isin(polled.value, sent)
    out = []
    for key in np.unique(polled.key[ours]).tolist():
        m = ours & (polled.key == key)
        have = held.get(key, np.zeros(0, np.int64))
        if final is not None:
            have = np.concatenate([have, final.of(key)[1]])
        gone = m & ~np.isin(polled.value, have)
        if not gone.any():
            continue
        rows = np.flatnonzero(gone)
        # Each value once, with the first poll that returned it.
        _, first = np.unique(polled.value[rows], return_index=True)
        rows = rows[first][np.argsort(polled.op[rows[first]], kind="stable")]
        out.append(_finding(int(key), polled, rows, unclean))
    return out


def _finding(key: int, polled: Polled, rows: np.ndarray, unclean: bool) -> Finding:
    shown = rows[:SHOWN]
    said = ", ".join(
        f"value {v} at offset {o} (op {i})"
        for v, o, i in zip(
            polled.value[shown].tolist(), polled.offset[shown].tolist(),
            polled.op[shown].tolist(), strict=True,
        )
    )  # fmt: skip
    more = f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return Finding(
        LOST_COMMITTED,
        key,
        tuple(int(i) for i in polled.op[shown]),
        f"{len(rows)} record(s) of key {key} a consumer was given during the run are in no "
        f"final read and no broker's final log: {said}{more}. Rule: {RULE}",
        {"values": polled.value[rows].tolist(), "offsets": polled.offset[rows].tolist(),
         "polls": polled.op[rows].tolist(), "rule": RULE},
        tolerated=f"unclean leader elections were allowed: {UNCLEAN}" if unclean else None,
    )  # fmt: skip
