"""Dependency edges between queue ops, what the queue checks hand the cycle search: as integer
columns (EdgeArrays: millions fit where objects would not), and as objects (Edge) for the few a
cycle search explains.

`rel` is WW_CODE or WR_CODE; `value` is the earlier value (ww) or the value read (wr); `value2`
the later value of a ww edge (0, meaningless, on wr edges).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import numpy as np

from checkers.scan.columns import narrowed, widened


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


# Edges per part read back from a spill (at most, unless one piece a check wrote holds more):
# 4M edges are 164 MB.
SPILL_PART = 1 << 22
# What is written of each kind of edge: `rel` is the file's, and a wr edge has no value2.
_STORED = {"ww": ("src", "dst", "key", "value", "value2"), "wr": ("src", "dst", "key", "value")}


@dataclass(frozen=True)
class _Chunk:
    """Edges of one kind written at once: `n` of them; of each stored field, where in its
    file, as what type, from what base (columns.narrowed)."""

    rel: str
    n: int
    fields: tuple[tuple[str, int, np.dtype, int], ...]  # (field, byte offset, type, base)


class EdgeSpill:
    """Edges written to files as a check makes them, piece by piece, ww and wr apart, each
    field as offsets in the narrowest type that holds them (op indices, keys and values of
    one piece span far less than int64 holds: half the bytes): a streamed check
    (checkers/families/queue/streamed.py) holds no more than the pieces in flight. `finish` gives
    them back as SpilledEdges: every ww edge, then every wr edge, each in the order written (the
    order of the in-memory check's parts)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._files = {
            (rel, f): open(directory / f"{rel}.{f}", "wb")  # noqa: SIM115 (closed by finish)
            for rel, stored in _STORED.items()
            for f in stored
        }
        self._chunks: dict[str, list[_Chunk]] = {rel: [] for rel in _STORED}

    def add(self, ww: EdgeArrays, wr: EdgeArrays) -> None:
        for rel, part in (("ww", ww), ("wr", wr)):
            if not len(part):
                continue
            fields = []
            for f in _STORED[rel]:
                col, base = narrowed(getattr(part, f))
                file = self._files[(rel, f)]
                fields.append((f, file.tell(), col.dtype, base))
                file.write(memoryview(np.ascontiguousarray(col)))
            self._chunks[rel].append(_Chunk(rel, len(part), tuple(fields)))

    def finish(self, part: int = SPILL_PART) -> SpilledEdges:
        for file in self._files.values():
            file.close()
        return SpilledEdges(self.directory, [*self._chunks["ww"], *self._chunks["wr"]], part)


class SpilledEdges(Sequence[EdgeArrays]):
    """Edges on disk (EdgeSpill), read back a part of at most `part` edges at a time (runs of
    the chunks written, of one kind): the cycle search reads them part by part, and only when
    it has windows to look in."""

    def __init__(self, directory: Path, chunks: list[_Chunk], part: int = SPILL_PART) -> None:
        self.directory = directory
        self._parts: list[list[_Chunk]] = []
        for c in chunks:
            last = self._parts[-1] if self._parts else None
            if last and last[0].rel == c.rel and sum(x.n for x in last) + c.n <= part:
                last.append(c)
            else:
                self._parts.append([c])
        self.edges = sum(c.n for c in chunks)

    def __len__(self) -> int:
        return len(self._parts)

    @overload
    def __getitem__(self, i: int) -> EdgeArrays: ...
    @overload
    def __getitem__(self, i: slice) -> list[EdgeArrays]: ...
    def __getitem__(self, i: int | slice) -> EdgeArrays | list[EdgeArrays]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        chunks = self._parts[i]
        rel, n = chunks[0].rel, sum(c.n for c in chunks)
        cols = {f: np.zeros(n, dtype=np.int64) for f in FIELDS[1:]}  # value2: 0 on wr edges
        at = 0
        for c in chunks:
            for f, offset, stored, base in c.fields:
                path = self.directory / f"{rel}.{f}"
                col = np.fromfile(path, dtype=stored, count=c.n, offset=offset)
                widened(col, base, cols[f][at : at + c.n])
            at += c.n
        code = WW_CODE if rel == "ww" else WR_CODE
        return EdgeArrays(np.full(n, code, dtype=np.int8), *(cols[f] for f in FIELDS[1:]))
