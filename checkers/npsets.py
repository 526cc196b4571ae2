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
    v = x[valid]
    ids = np.zeros(len(x), dtype=np.int64)
    if len(v) == 0:
        return v.copy(), ids
    lo, hi = int(v.min()), int(v.max())
    if hi - lo < 4 * len(v) + 1024:
        at = v - lo
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[at] = True
        ids[valid] = (np.cumsum(present) - 1)[at]
        return np.flatnonzero(present) + lo, ids
    u = unique_sorted(v)
    ids[valid] = np.searchsorted(u, v)
    return u, ids
