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
