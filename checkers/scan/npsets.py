"""Set operations on int64 arrays by sorting.

numpy 2.x's np.unique and np.isin go through a hash table that measured 5x slower than a plain
sort on millions of int64 here (the profile in docs/checkers.md); these are the sort versions.
"""

from __future__ import annotations

import numpy as np


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """The distinct values of x, ascending."""
    if len(x) == 0:
        return x.copy()
    s = np.sort(x)
    return s[np.r_[True, s[1:] != s[:-1]]]


def member(q: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """q[i] in ref, for each i."""
    u = unique_sorted(np.asarray(ref))
    if len(u) == 0:
        return np.zeros(len(q), dtype=bool)
    pos = np.minimum(np.searchsorted(u, q), len(u) - 1)
    return u[pos] == q


def dense_ids(x: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(u, ids): u the distinct values of x[valid] ascending, ids[i] the position of x[i] in u
    (0 where not valid). Values sent and offsets are near-dense integers, so when their range
    is at most a few times their count this is a lookup table (no sort, no binary search);
    otherwise a sort and searchsorted."""
    every = bool(valid.all())
    v = x if every else x[valid]
    if len(v) == 0:
        return v.copy(), np.zeros(len(x), dtype=np.int64)
    lo, hi = int(v.min()), int(v.max())
    if hi - lo < 4 * len(v) + 1024:
        at = v - lo
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[at] = True
        rank = np.cumsum(present) - 1
        if every:
            return np.flatnonzero(present) + lo, rank[at]
        ids = np.zeros(len(x), dtype=np.int64)
        ids[valid] = rank[at]
        return np.flatnonzero(present) + lo, ids
    ids = np.zeros(len(x), dtype=np.int64)
    u = unique_sorted(v)
    ids[valid] = np.searchsorted(u, v)
    return u, ids


class IdIndex:
    """Where each query occurs in `keys`: ids of the form high * base + low (0 <= low < base),
    such as a (key, value) pair as kid * NV + vid. A table indexed by `low` finds the candidate
    in one step (no binary search over millions: random access once, not log2(n) times); the
    few lows that several distinct ids share fall back to a sort and searchsorted."""

    def __init__(self, keys: np.ndarray, space: int, base: int) -> None:
        """`space`: every id is below it; `base`: the modulus (used only when a table over the
        whole space would be too large)."""
        self.keys = keys
        self.base = space if space <= 2 * len(keys) + (1 << 22) else max(base, 1)
        dtype = np.int32 if len(keys) < 1 << 31 else np.int64
        self.slot = np.full(self.base, -1, dtype=dtype)
        self.exact = self.base == space
        low = keys if self.exact else keys % self.base
        self.slot[low] = np.arange(len(keys), dtype=dtype)
        self.multi = np.zeros(0 if self.exact else self.base, dtype=bool)  # exact: unused
        if not self.exact:
            self.multi[low[keys[self.slot[low]] != keys]] = True
        self._fallback: tuple[np.ndarray, np.ndarray] | None = None

    def find(self, q: np.ndarray) -> np.ndarray:
        """A position j with keys[j] == q[i] (any, if several), else -1, for each i."""
        out = np.full(len(q), -1, dtype=np.int64)
        if len(self.keys) == 0:
            return out
        if self.exact:
            # One slot per possible id: the slot is the answer (no modulus, no check, no
            # shared slots), one gather instead of three.
            valid = (q >= 0) & (q < self.base)
            j = self.slot[np.where(valid, q, 0)]
            out[valid] = j[valid]
            return out
        valid = q >= 0
        low = np.where(valid, q % self.base, 0)
        j = self.slot[low].astype(np.int64)
        jc = np.maximum(j, 0)
        hit = valid & (j >= 0) & (self.keys[jc] == q)
        out[hit] = jc[hit]
        amb = np.flatnonzero(valid & ~hit & self.multi[low])
        if len(amb):
            rows, sorted_keys = self._shared()
            pos = np.minimum(np.searchsorted(sorted_keys, q[amb]), len(sorted_keys) - 1)
            found = sorted_keys[pos] == q[amb]
            out[amb[found]] = rows[pos[found]]
        return out

    def contains(self, q: np.ndarray) -> np.ndarray:
        return self.find(q) >= 0

    def _shared(self) -> tuple[np.ndarray, np.ndarray]:
        if self._fallback is None:
            rows = np.flatnonzero(self.multi[self.keys % self.base])
            rows = rows[np.argsort(self.keys[rows], kind="stable")]
            self._fallback = (rows, self.keys[rows])
        return self._fallback


def sort_rows(*cols: np.ndarray) -> np.ndarray:
    """The permutation sorting rows by cols[0], then cols[1], ..., then position: what
    np.lexsort(cols[::-1]) returns. When the columns' value ranges multiply to less than 2^62
    they are packed into one int64 key and sorted once, stably (timsort, near linear on the
    nearly sorted orders of a history); otherwise np.lexsort."""
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    spans = [(int(c.min()), int(c.max()) - int(c.min()) + 1) for c in cols]
    total = 1
    for _, span in spans:
        total *= span
    if total >= 1 << 62:
        return np.lexsort(cols[::-1])
    packed = np.zeros(n, dtype=np.int64)
    for c, (lo, span) in zip(cols, spans, strict=True):
        packed *= span
        packed += c - lo
    return np.argsort(packed, kind="stable")


def runs_within(counts: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive runs (start, end) of positions whose counts sum to at most `budget` each,
    cut greedily in order; a position counting more than `budget` is a run alone. Nothing for
    no counts."""
    runs, start, held = [], 0, 0
    for i, c in enumerate(np.asarray(counts).tolist()):
        if i > start and held + c > budget:
            runs.append((start, i))
            start, held = i, 0
        held += c
    if len(counts):
        runs.append((start, len(counts)))
    return runs
