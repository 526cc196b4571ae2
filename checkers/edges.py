"""Dependency edges between queue ops, what the queue checks hand the cycle search: as integer
columns (EdgeArrays: millions fit where objects would not), and as objects (Edge) for the few a
cycle search explains.

`rel` is WW_CODE or WR_CODE; `value` is the earlier value (ww) or the value read (wr); `value2`
the later value of a ww edge (0, meaningless, on wr edges).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Edge:
    """A dependency between two ops on one key: `rel` is "ww" or "wr"."""

    rel: str
    src: int
    dst: int
    key: int
    value: int  # ww: the earlier value; wr: the value read
    value2: int | None = None  # ww: the later value


WW_CODE, WR_CODE = 0, 1
_REL = {"ww": WW_CODE, "wr": WR_CODE}
_NAME = {WW_CODE: "ww", WR_CODE: "wr"}
FIELDS = ("rel", "src", "dst", "key", "value", "value2")


@dataclass(frozen=True)
class EdgeArrays:
    rel: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    key: np.ndarray
    value: np.ndarray
    value2: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    @staticmethod
    def empty() -> EdgeArrays:
        return EdgeArrays(np.zeros(0, np.int8), *(np.zeros(0, np.int64) for _ in range(5)))

    @staticmethod
    def from_edges(edges: Iterable[Edge]) -> EdgeArrays:
        es = list(edges)
        return EdgeArrays(
            np.array([_REL[e.rel] for e in es], dtype=np.int8),
            np.array([e.src for e in es], dtype=np.int64),
            np.array([e.dst for e in es], dtype=np.int64),
            np.array([e.key for e in es], dtype=np.int64),
            np.array([e.value for e in es], dtype=np.int64),
            np.array([e.value2 or 0 for e in es], dtype=np.int64),
        )

    @staticmethod
    def concat(parts: Iterable[EdgeArrays]) -> EdgeArrays:
        ps = [p for p in parts if len(p)]
        if not ps:
            return EdgeArrays.empty()
        return EdgeArrays(*(np.concatenate([getattr(p, f) for p in ps]) for f in FIELDS))

    def take(self, rows: np.ndarray | slice) -> EdgeArrays:
        return EdgeArrays(*(getattr(self, f)[rows] for f in FIELDS))

    def to_edges(self) -> list[Edge]:
        """As objects: only for the few edges a cycle search looks at."""
        out = []
        for r, s, d, k, v, v2 in zip(*(getattr(self, f).tolist() for f in FIELDS), strict=True):
            out.append(Edge(_NAME[r], s, d, k, v, v2 if r == WW_CODE else None))
        return out

    def sorted_rows(self) -> list[tuple[int, ...]]:
        """Every edge as a tuple, sorted: for comparing two paths in tests."""
        cols = [getattr(self, f).tolist() for f in FIELDS]
        rows = [
            (r, s, d, k, v, v2 if r == WW_CODE else 0)
            for r, s, d, k, v, v2 in zip(*cols, strict=True)
        ]
        return sorted(rows)
