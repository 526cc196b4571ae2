"""When a lost write was first seen lost: the earliest poll that proves its record was no longer
at its offset, which may come before the poll the queue's `lost-write` cites (the one that read
highest in the key).

A poll proves it when it was invoked after the write was acknowledged (the record was then at
its offset on the leader, below the high watermark) and it either returned another record at
that very offset, or returned, one after the other in the same partition, records at offsets
on both sides of it (it read across the offset without being handed it). A poll that merely
returned a higher offset proves nothing of the offset itself (the consumer may have been past
it already, from before an earlier loss gave the offset again).

A power loss can explain a lost write only if it came before the write was seen lost: KIP-966's
data loss happens at the unclean shutdown ("When the last replica in the ISR experiences an
unclean shutdown and loses committed data, it will be reelected leader after starting up
again"), so a committed record a consumer was denied before any power loss was lost by
something else, with ELR on or off (docs/checkers.md, "Lost writes").
"""

from __future__ import annotations

import math

import numpy as np

from checkers.families.durability.polled import Polled
from checkers.scan.op_arrays import OpArrays


class FirstSeen:
    """The proofs of every poll, indexed per key: the records returned (by offset), and the gaps
    a poll read across (consecutive records of one partition more than one offset apart)."""

    def __init__(self, polled: Polled, ops: OpArrays) -> None:
        rows = ops.rows_of(polled.op)
        known = rows >= 0
        inv = np.where(known, ops.invoke_time[np.maximum(rows, 0)], -1)
        done = np.where(known, ops.complete_time[np.maximum(rows, 0)], -1).astype(float)
        done[done < 0] = math.inf  # a poll that never completed proves nothing by a time
        self._by_key: dict[int, tuple[np.ndarray, ...]] = {}
        for key in np.unique(polled.key).tolist():
            m = np.flatnonzero(polled.key == key)
            order = m[np.argsort(polled.offset[m], kind="stable")]
            # Gaps: consecutive elements of one poll (elements are stored in read order).
            same = polled.op[m][1:] == polled.op[m][:-1]
            lo, hi = polled.offset[m][:-1], polled.offset[m][1:]
            gap = same & (hi - lo > 1)
            g = m[:-1][gap]
            self._by_key[key] = (
                polled.offset[order], polled.value[order], inv[order], done[order],
                lo[gap], hi[gap], inv[g], done[g],
            )  # fmt: skip

    def seen(self, key: int, offset: int, value: int, acked_at: int) -> float:
        """The completion of the first poll invoked after `acked_at` that proves the record of
        `value` acknowledged at `offset` was gone; inf when none does."""
        got = self._by_key.get(key)
        if got is None or offset < 0 or acked_at < 0:
            return math.inf
        offs, vals, inv, done, lo, hi, ginv, gdone = got
        a, b = np.searchsorted(offs, [offset, offset + 1])
        other = (vals[a:b] != value) & (inv[a:b] > acked_at)
        across = (lo < offset) & (hi > offset) & (ginv > acked_at)
        times = np.concatenate([done[a:b][other], gdone[across]])
        return float(times.min()) if len(times) else math.inf
