"""Element columns as numpy arrays sorted by (key, index, seq): the vectorised path's input.

Nullable integers become a value array plus a validity mask (a float round trip through pandas
would lose precision past 2^53); strings become dictionary codes, decoded only for the rows a
finding quotes.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, fields

import numpy as np
import pyarrow as pa

from checkers.families.queue.elem import FAIL, INFO, OK, Elem
from checkers.scan.columns import CodeBook, fixed_width, is_name, to_numpy
from checkers.scan.npsets import dense_ids


def _ints(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values as int64, 0 where null; validity)."""
    values, valid = fixed_width(col, np.int64)
    return values, np.ones(len(values), dtype=bool) if valid is None else valid


@dataclass(frozen=True)
class ElemArrays:
    key: np.ndarray
    index: np.ndarray
    seq: np.ndarray
    time: np.ndarray
    has_time: np.ndarray
    offset: np.ndarray
    has_off: np.ndarray
    value: np.ndarray
    has_val: np.ndarray
    rebalanced: np.ndarray
    typ: np.ndarray
    type_names: list[str | None]
    kind: np.ndarray
    kind_names: list[str | None]
    proc: np.ndarray
    proc_names: list[str | None]
    invoke_time: np.ndarray  # of the element's op: what the cycle search orders ops by
    # Pipelined sends (QueueContext.producers), None unless asked for: each element's producer
    # (-1: none) and its op's invocation index (that producer's send order).
    producer: np.ndarray | None = None
    invoke_index: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.key)

    def slice(self, lo: int, hi: int) -> ElemArrays:
        """Rows lo..hi as views (no copy)."""
        return ElemArrays(
            *(
                getattr(self, f.name)[lo:hi]
                if isinstance(getattr(self, f.name), np.ndarray)
                else getattr(self, f.name)
                for f in fields(self)
            )
        )

    def is_type(self, name: str) -> np.ndarray:
        return is_name(self.typ, self.type_names, name)

    def is_kind(self, name: str) -> np.ndarray:
        return is_name(self.kind, self.kind_names, name)

    def elem(self, i: int) -> Elem:
        """Row i as the reference path's object, for wording a finding."""
        return Elem(
            int(self.index[i]),
            str(self.type_names[self.typ[i]]),
            str(self.proc_names[self.proc[i]]),
            int(self.time[i]) if self.has_time[i] else None,
            int(self.seq[i]),
            str(self.kind_names[self.kind[i]]),
            int(self.offset[i]) if self.has_off[i] else None,
            int(self.value[i]) if self.has_val[i] else None,
            bool(self.rebalanced[i]),
            *self._producer_of(i),
        )

    def _producer_of(self, i: int) -> tuple[int | None, int | None]:
        if self.producer is None or self.invoke_index is None:
            return None, None
        q = int(self.producer[i])
        return (None if q < 0 else q), int(self.invoke_index[i])


def elem_arrays(
    table: pa.Table, pool: Executor | None = None, producers: bool | None = None
) -> ElemArrays:
    """From element rows (history.columnar.ELEMENT_CHECK_COLUMNS at least), sorted by
    (key, index, seq). `producers`: carry PRODUCER_COLUMNS too (None: when the table has
    them)."""
    if producers is None:
        producers = all(c in table.column_names for c in PRODUCER_COLUMNS)
    build = ElemArraysBuilder(fixed_width(table.column("key"), np.int64)[0], pool, producers)
    build.add(table)
    return build.finish()


# Nullable integer and string columns of an element, as ElemArraysBuilder decodes them.
_INT_COLUMNS = ("time", "offset", "value")
CODE_COLUMNS = ("type", "kind", "process")
# What a pipelined history's elements add for the producer-order rule (QueueContext.producers):
# read only for histories whose header declares idempotent producers, so that no other history
# pays for them.
PRODUCER_COLUMNS = ("producer", "invoke_index")


class ElemArraysBuilder:
    """Element rows arriving part by part (history.columnar.check_parts), each column of each
    part written straight to its final (key, index, seq) position. The keys, in file order,
    are known before the first part (history.columnar.read_element_keys), so each key's place
    in the result is known up front: no column is ever held twice (once in file order, once
    sorted) and no part is kept, which at 10M ops saved about 1.5 GB of fresh pages. A part's
    rows are placed by a stable sort of the part alone, behind the rows of the same keys
    before it: every permutation is part-sized and stays in cache (a permutation of the whole
    history was 10M random writes over 100 MB). Each column is put in place by a scatter
    (`out[dest] = x`: reads in row order, writes to one place per key) rather than a gather.
    Rows stored in (index, seq) order (kchaos writes them so) need only that stable sort by
    key; any other order is sorted in full by `finish`."""

    def __init__(
        self, keys: np.ndarray, pool: Executor | None = None, producers: bool = False
    ) -> None:
        """`producers`: decode PRODUCER_COLUMNS too."""
        n = len(keys)
        self._pool, self._at = pool, 0
        ukeys, kid = dense_ids(keys, np.ones(n, dtype=bool))
        counts = np.bincount(kid, minlength=len(ukeys))
        self.key = np.repeat(ukeys, counts)
        # The next free place of each key; kid kept narrow, it is sliced part by part.
        self._next = np.cumsum(counts) - counts
        self._kid = kid.astype(np.int16) if len(ukeys) < 1 << 15 else kid
        del kid
        self._out = {c: np.empty(n, dtype) for c, dtype in column_dtypes(producers).items()}
        self._books = code_books()
        self._in_order = True
        self._last: tuple[int, int] | None = None  # (index, seq) of the previous part's last row

    def add(self, part: pa.Table) -> None:
        """The next element rows in file order (ELEMENT_CHECK_COLUMNS at least; `key` is not
        read: the keys came first)."""
        lo, hi = self._at, self._at + part.num_rows
        if hi > len(self.key):
            raise ValueError(f"{hi} element rows given, {len(self.key)} keys known")
        self._at = hi
        if lo == hi:
            return
        dest = self._places(lo, hi)
        out = self._out

        def put(name: str, x: np.ndarray) -> None:
            out[name][dest] = x

        jobs = column_jobs(part, self._books, "producer" in out, put, self._check_order)
        if self._pool is None:
            for job in jobs:
                job()
        else:
            list(self._pool.map(lambda job: job(), jobs))

    def _places(self, lo: int, hi: int) -> np.ndarray | slice:
        """Where rows lo..hi go: after the rows of their key placed before, in their order."""
        if len(self._next) == 1:
            return slice(lo, hi)
        kid = self._kid[lo:hi]
        order = np.argsort(kid, kind="stable")  # a radix sort on int16
        counts = np.bincount(kid, minlength=len(self._next))
        first = np.cumsum(counts) - counts  # of each key, in the sorted part
        ks = kid[order]
        dest = np.empty(hi - lo, dtype=np.int64)
        dest[order] = self._next[ks] + (np.arange(hi - lo) - first[ks])
        self._next += counts
        return dest

    def _check_order(self, index: np.ndarray, seq: np.ndarray) -> None:
        self._in_order, self._last = still_in_order(self._in_order, self._last, index, seq)

    def finish(self) -> ElemArrays:
        if self._at != len(self.key):
            raise ValueError(f"{self._at} element rows given, {len(self.key)} keys known")
        return arrays_of(self.key, self._out, self._books, self._in_order)


def column_dtypes(producers: bool = False) -> dict[str, type]:
    """The decoded columns of the element rows (as column_jobs puts them), and their types."""
    out: dict[str, type] = {
        "index": np.int64, "seq": np.int32, "invoke_time": np.int64, "rebalanced": np.bool_,
        **{c: np.int64 for c in _INT_COLUMNS},
        **{f"has_{c}": np.bool_ for c in _INT_COLUMNS},
        **{c: np.int32 for c in CODE_COLUMNS},
    }  # fmt: skip
    if producers:
        out.update({c: np.int64 for c in PRODUCER_COLUMNS})
    return out


def code_books() -> dict[str, CodeBook]:
    """One CodeBook per string column, shared by every part of one history."""
    return {c: CodeBook() for c in CODE_COLUMNS}


def column_jobs(
    part: pa.Table,
    books: dict[str, CodeBook],
    producers: bool,
    put: Callable[[str, np.ndarray], None],
    check_order: Callable[[np.ndarray, np.ndarray], None],
) -> list[Callable[[], None]]:
    """One job per column (or pair) of `part`, each decoding it and handing it to
    `put(name, values)` in the part's row order (column_dtypes names them); independent, so
    they may run on threads. `check_order(index, seq)` sees the order columns."""

    def ints(name: str) -> None:
        values, valid = _ints(part.column(name))
        put(name, values)
        put(f"has_{name}", valid)

    def invoked() -> None:
        put("invoke_time", fixed_width(part.column("invoke_time"), np.int64)[0])

    def order() -> None:
        index = fixed_width(part.column("index"), np.int64)[0]
        seq = fixed_width(part.column("seq"), np.int32)[0]
        check_order(index, seq)
        put("index", index)
        put("seq", seq)

    def rebalanced() -> None:
        col = part.column("rebalanced").cast(pa.bool_())
        values = col.fill_null(False) if col.null_count else col
        put("rebalanced", to_numpy(values).astype(bool))

    def producer() -> None:
        values, valid = fixed_width(part.column("producer"), np.int64)
        put("producer", values if valid is None else np.where(valid, values, -1))
        put("invoke_index", fixed_width(part.column("invoke_index"), np.int64)[0])

    jobs: list[Callable[[], None]] = [order, rebalanced, invoked]
    if producers:
        jobs.append(producer)
    jobs += [lambda c=c: ints(c) for c in _INT_COLUMNS]
    jobs += [lambda c=c: put(c, books[c].encode(part.column(c))) for c in CODE_COLUMNS]
    return jobs


def still_in_order(
    in_order: bool, last: tuple[int, int] | None, index: np.ndarray, seq: np.ndarray
) -> tuple[bool, tuple[int, int] | None]:
    """(are the rows so far, then these, in ascending (index, seq) order; the last row's
    (index, seq)), from the answer for the rows before and their last row."""
    if not len(index):
        return in_order, last
    if in_order and last is not None:
        in_order = (int(index[0]), int(seq[0])) > last
    if in_order and len(index) > 1:
        di, ds = np.diff(index), np.diff(seq)
        in_order = bool(np.all((di > 0) | ((di == 0) & (ds > 0))))
    return in_order, (int(index[-1]), int(seq[-1]))


def arrays_of(
    key: np.ndarray, o: dict[str, np.ndarray], books: dict[str, CodeBook], in_order: bool
) -> ElemArrays:
    """ElemArrays from decoded columns whose rows are grouped by key (ascending), each key's
    rows in file order; `in_order`: file order is (index, seq) order, else every column is
    sorted by (key, index, seq) now (in place of `o`'s columns)."""
    if not in_order:
        # Rows in some other order: one full sort by (key, index, seq), and a gather of every
        # column.
        order = np.lexsort((o["seq"], o["index"], key))
        for name in o:
            o[name] = o[name][order]
    names = {c: books[c].names for c in CODE_COLUMNS}
    return ElemArrays(
        key, o["index"], o["seq"], o["time"], o["has_time"], o["offset"],
        o["has_offset"], o["value"], o["has_value"], o["rebalanced"],
        o["type"], names["type"], o["kind"], names["kind"], o["process"], names["process"],
        o["invoke_time"], o.get("producer"), o.get("invoke_index"),
    )  # fmt: skip


__all__ = [
    "CODE_COLUMNS",
    "FAIL",
    "INFO",
    "OK",
    "PRODUCER_COLUMNS",
    "ElemArrays",
    "ElemArraysBuilder",
    "elem_arrays",
]
