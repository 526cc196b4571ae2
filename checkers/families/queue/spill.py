"""The element rows of a history too big to hold, spilled to disk in buckets of whole keys: what
the local engine checks batch by batch when a history is streamed (checkers/scan/load.py,
queue/streamed.py).

The history's keys and their element counts are read first (history.columnar
.element_key_counts), and the keys, ascending, are cut into buckets of at most `budget`
elements (a key with more is a bucket alone: no rule ever sees part of a key). Then one pass
over the history decodes each part's element rows as the in-memory path does
(arrays.column_jobs), sorts the part's rows by key (a stable, part-sized sort), and writes each
bucket's rows as one block file: every column's bytes, one after the other, integer columns as
offsets in the narrowest type that holds them (columns.narrowed), keys not at all. A bucket is
loaded by reading its blocks in file order and putting each block's run of each key after
that key's rows so far: the bucket's ElemArrays, rows in (key, index, seq) order, exactly the
rows of those keys the in-memory path would hold. Buckets follow the keys' order, so their rows
one after the other are the in-memory path's rows.

Each block is read back by plain reads (not mapped: mapped pages of the files would count in
the process's resident memory as long as the kernel kept them), and the files are deleted with
the spill (`close`). Info sends (QueueContext) are collected on the way,
the one cross-key fact every check asks for.
"""

from __future__ import annotations

import io
import shutil
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from checkers.families.queue.arrays import (
    ElemArrays,
    arrays_of,
    code_books,
    column_dtypes,
    column_jobs,
    still_in_order,
)
from checkers.families.queue.elem import INFO
from checkers.scan.columns import fixed_width, is_name, narrowed, widened
from checkers.scan.npsets import runs_within


@dataclass(frozen=True)
class Bucket:
    """A run of the history's keys (ascending), and the element rows each holds."""

    keys: np.ndarray
    counts: np.ndarray
    first: int  # the rank of keys[0] among all the history's keys

    @property
    def size(self) -> int:
        return int(self.counts.sum())


def plan_buckets(keys: np.ndarray, counts: np.ndarray, budget: int) -> list[Bucket]:
    """`keys` (ascending) cut into runs of at most `budget` element rows each; a key with more
    than `budget` is a run alone."""
    return [Bucket(keys[a:b], counts[a:b], a) for a, b in runs_within(counts, budget)]


@dataclass(frozen=True)
class _Block:
    """One part's rows of one bucket, in one file: `counts[i]` rows of key rank `ranks[i]`,
    ranks ascending; each column of `columns` (name, stored type, base: columns.narrowed)
    whole before the next."""

    path: Path
    ranks: np.ndarray
    counts: np.ndarray
    columns: tuple[tuple[str, np.dtype, int], ...]

    @property
    def rows(self) -> int:
        return int(self.counts.sum())


@dataclass
class _Infos:
    index: list[np.ndarray] = field(default_factory=list)
    key: list[np.ndarray] = field(default_factory=list)
    value: list[np.ndarray] = field(default_factory=list)


class SpilledElements:
    """Element rows written part by part (`add`, in file order, as history.columnar.check_parts
    gives them, `key` included) into bucket files under `directory` (made here, removed by
    `close`); then each bucket loaded whole (`load`), or some of its columns (`columns`)."""

    def __init__(
        self,
        directory: Path,
        keys: np.ndarray,
        counts: np.ndarray,
        budget: int,
        pool: Executor | None = None,
        producers: bool = False,
    ) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.keys = keys
        self.buckets = plan_buckets(keys, counts, budget)
        self._bucket_of = np.repeat(
            np.arange(len(self.buckets)), [len(b.keys) for b in self.buckets]
        )
        self._pool = pool
        self._producers = producers
        self._dtypes = column_dtypes(producers)
        self._all_dtypes: dict[str, type] = {"key": np.int64, **self._dtypes}
        self._buffers: dict[str, np.ndarray] = {}
        self._names = sorted(self._dtypes, key=lambda c: -np.dtype(self._dtypes[c]).itemsize)
        self._books = code_books()
        self._in_order, self._last = True, None
        self._blocks: list[list[_Block]] = [[] for _ in self.buckets]
        self._infos = _Infos()
        self._parts = 0
        self._counts = counts
        self._added = np.zeros(len(keys), dtype=np.int64)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="spill")
        self._writing: Future[None] | None = None
        self.n_elements = 0

    def __len__(self) -> int:
        """The number of buckets."""
        return len(self.buckets)

    def add(self, part: pa.Table) -> None:
        """The next element rows in file order (ELEMENT_CHECK_COLUMNS, and PRODUCER_COLUMNS
        when asked for)."""
        n = part.num_rows
        if n == 0:
            return
        key = fixed_width(part.column("key"), np.int64)[0]
        rank = np.minimum(np.searchsorted(self.keys, key), max(len(self.keys) - 1, 0))
        if len(self.keys) == 0 or not np.array_equal(self.keys[rank], key):
            raise ValueError("an element row's key was not among the keys counted")
        rank = rank.astype(np.int16) if len(self.keys) < 1 << 15 else rank
        order = np.argsort(rank, kind="stable")  # a radix sort on int16
        cols: dict[str, np.ndarray] = {}

        def put(name: str, x: np.ndarray) -> None:
            cols[name] = x[order]

        def order_seen(index: np.ndarray, seq: np.ndarray) -> None:
            self._in_order, self._last = still_in_order(self._in_order, self._last, index, seq)

        jobs = column_jobs(part, self._books, self._producers, put, order_seen)
        if self._pool is None:
            for job in jobs:
                job()
        else:
            list(self._pool.map(lambda job: job(), jobs))
        per_rank = np.bincount(rank, minlength=len(self.keys))
        self._added += per_rank
        ranks = np.flatnonzero(per_rank)
        self._note_infos(cols, np.repeat(self.keys[ranks], per_rank[ranks]))
        # Written by a thread of its own while the next part is decoded; one part at a time, so
        # that blocks stay in part order and at most one part's columns wait.
        self._written()
        self._writing = self._writer.submit(self._write, cols, ranks, per_rank[ranks], self._parts)
        self._parts += 1
        self.n_elements += n

    def _note_infos(self, cols: dict[str, np.ndarray], key: np.ndarray) -> None:
        """The part's sends in info ops (engine.ElementFacts.info_sends), kept: they are few."""
        kinds, types = self._books["kind"].names, self._books["type"].names
        info = is_name(cols["kind"], kinds, "send") & is_name(cols["type"], types, INFO)
        at = np.flatnonzero(info & cols["has_value"])
        if len(at):
            self._infos.index.append(cols["index"][at])
            self._infos.key.append(key[at])
            self._infos.value.append(cols["value"][at])

    def _written(self) -> None:
        """Wait for the part being written (raising what its writing raised)."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    def finish(self) -> SpilledElements:
        """Every part given is written: the spill can be read."""
        self._written()
        self._writer.shutdown()
        wrong = np.flatnonzero(self._added != self._counts)
        if len(wrong):
            k = int(wrong[0])
            raise ValueError(
                f"key {int(self.keys[k])}: {int(self._added[k])} element rows given, "
                f"{int(self._counts[k])} counted"
            )
        return self

    def _write(
        self, cols: dict[str, np.ndarray], ranks: np.ndarray, counts: np.ndarray, part: int
    ) -> None:
        """Each bucket's rows of the part (a run of `cols`, which are sorted by key rank) as one
        block file. The keys are not written (a block's runs say them), and every integer
        column as offsets in the narrowest type that holds them (columns.narrowed: at 100M ops
        the spill was 51 bytes an element, then 26)."""
        ends = np.cumsum(counts)
        starts = ends - counts
        buckets = self._bucket_of[ranks]
        cuts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
        for i, j in zip(cuts.tolist(), [*cuts[1:].tolist(), len(ranks)], strict=True):
            b = int(buckets[i])
            lo, hi = int(starts[i]), int(ends[j - 1])
            path = self.directory / f"{b}-{part}"
            stored = []
            with open(path, "wb") as f:
                for name in self._names:
                    col, base = narrowed(cols[name][lo:hi])
                    f.write(memoryview(col))
                    stored.append((name, col.dtype, base))
            self._blocks[b].append(
                _Block(path, ranks[i:j].copy(), counts[i:j].copy(), tuple(stored))
            )

    def info_sends(self) -> list[tuple[int, int, int]]:
        """(op index, key, value) of every send with a value in an `info` op."""
        i = self._infos
        if not i.index:
            return []
        cols = [np.concatenate(x).tolist() for x in (i.index, i.key, i.value)]
        return sorted(zip(*cols, strict=True))

    def load(self, b: int, reuse: bool = False) -> ElemArrays:
        """Bucket `b`'s rows, in (key, index, seq) order. `reuse`: in the same memory as the
        bucket loaded before with `reuse` (which must no longer be used): every bucket's
        arrays in fresh pages were a third of a streamed check's page faults."""
        bucket = self.buckets[b]
        n = bucket.size
        if reuse:
            if not self._buffers:
                most = max(x.size for x in self.buckets)
                self._buffers = {name: np.empty(most, t) for name, t in self._all_dtypes.items()}
            out = {name: self._buffers[name][:n] for name in self._names}
            key = self._buffers["key"][:n]
        else:
            out = {name: np.empty(n, self._dtypes[name]) for name in self._names}
            key = np.empty(n, np.int64)
        at_key = np.cumsum(bucket.counts) - bucket.counts
        for k, lo, c in zip(
            bucket.keys.tolist(), at_key.tolist(), bucket.counts.tolist(), strict=True
        ):
            key[lo : lo + c] = k
        nxt = np.cumsum(bucket.counts) - bucket.counts  # each key's next free place
        for block in self._blocks[b]:
            local = block.ranks - bucket.first
            rows = block.rows
            if len(local) == 1:  # one key: its run goes in one piece
                at: slice | np.ndarray = slice(int(nxt[local[0]]), int(nxt[local[0]]) + rows)
            else:
                run_start = np.cumsum(block.counts) - block.counts
                at = np.repeat(nxt[local] - run_start, block.counts) + np.arange(rows)
            nxt[local] += block.counts
            with open(block.path, "rb", buffering=0) as f:
                for name, stored, base in block.columns:
                    if isinstance(at, slice) and stored == out[name].dtype and base == 0:
                        _read_into(f, out[name][at])
                        continue
                    col = np.empty(rows, stored)
                    _read_into(f, col)
                    if isinstance(at, slice):
                        widened(col, base, out[name][at])
                    else:
                        wide = np.empty(rows, out[name].dtype)
                        widened(col, base, wide)
                        out[name][at] = wide
        return arrays_of(key, out, self._books, self._in_order)

    def columns(self, b: int, names: list[str]) -> dict[str, np.ndarray]:
        """Some columns of bucket `b`'s rows (`key` among them, if asked), in the order they
        were stored (grouped by key, not sorted within a key): for questions about every row
        that need few of its columns."""
        parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
        for block in self._blocks[b]:
            rows = block.rows
            if "key" in parts:
                parts["key"].append(np.repeat(self.keys[block.ranks], block.counts))
            with open(block.path, "rb", buffering=0) as f:
                at = 0
                for name, stored, base in block.columns:
                    if name in parts:
                        f.seek(at)
                        col = np.empty(rows, stored)
                        _read_into(f, col)
                        wide = np.empty(rows, self._dtypes[name])
                        widened(col, base, wide)
                        parts[name].append(wide)
                    at += rows * stored.itemsize
        dtypes = self._all_dtypes
        return {
            name: np.concatenate(p) if p else np.zeros(0, dtypes[name]) for name, p in parts.items()
        }

    def names_of(self, column: str) -> list[str | None]:
        """The names a coded column's codes stand for (type, kind, process)."""
        return self._books[column].names

    def close(self) -> None:
        """Delete the spill's files (and drop the reused buckets' memory)."""
        self._writer.shutdown()
        self._buffers = {}
        shutil.rmtree(self.directory, ignore_errors=True)


def _read_into(f: io.RawIOBase, out: np.ndarray) -> None:
    """Fill `out` from `f`'s next bytes."""
    view = memoryview(out).cast("B")
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise OSError("a spilled block ended early")
        got += n
