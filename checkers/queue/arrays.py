"""Element columns as numpy arrays sorted by (key, index, seq): the vectorised path's input.

Nullable integers become a value array plus a validity mask (a float round trip through pandas
would lose precision past 2^53); strings become dictionary codes, decoded only for the rows a
finding quotes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkers.queue.elem import FAIL, INFO, OK, Elem


def _ints(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    valid = pc.is_valid(col)
    vals = pc.fill_null(col.cast(pa.int64()), 0)
    return _np(vals).astype(np.int64, copy=False), _np(valid).astype(bool, copy=False)


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col.to_numpy(zero_copy_only=False)


def _codes(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str | None]]:
    """(code per row, name per code); a null becomes its own code named None."""
    if isinstance(col, pa.Array):
        col = pa.chunked_array([col])
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col.cast(pa.string()))
    col = col.unify_dictionaries()
    arr = (
        col.combine_chunks()
        if col.num_chunks != 1
        else col.chunk(0)
        if col.num_chunks
        else pa.array([], type=col.type)
    )
    names = [*arr.dictionary.to_pylist(), None]
    codes = _np(pc.fill_null(arr.indices, len(names) - 1)).astype(np.int32)
    return codes, names


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

    def __len__(self) -> int:
        return len(self.key)

    def is_type(self, name: str) -> np.ndarray:
        return _is(self.typ, self.type_names, name)

    def is_kind(self, name: str) -> np.ndarray:
        return _is(self.kind, self.kind_names, name)

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
        )


def _is(codes: np.ndarray, names: list[str | None], name: str) -> np.ndarray:
    hits = [c for c, n in enumerate(names) if n == name]
    return np.isin(codes, hits) if hits else np.zeros(len(codes), dtype=bool)


def elem_arrays(table: pa.Table) -> ElemArrays:
    """From element rows (history.columnar.ELEMENT_COLUMNS), sorted by (key, index, seq)."""
    key, _ = _ints(table.column("key"))
    index, _ = _ints(table.column("index"))
    seq, _ = _ints(table.column("seq"))
    # Sort first, then decode the rest already in order: one gather per column.
    order = np.lexsort((seq, index, key))
    t = table.take(pa.array(order)) if not _is_sorted(order) else table
    time, has_time = _ints(t.column("time"))
    offset, has_off = _ints(t.column("offset"))
    value, has_val = _ints(t.column("value"))
    reb = _np(pc.fill_null(t.column("rebalanced").cast(pa.bool_()), False)).astype(bool)
    typ, type_names = _codes(t.column("type"))
    kind, kind_names = _codes(t.column("kind"))
    proc, proc_names = _codes(t.column("process"))
    return ElemArrays(
        key[order], index[order], seq[order], time, has_time, offset, has_off, value, has_val,
        reb, typ, type_names, kind, kind_names, proc, proc_names,
    )  # fmt: skip


def _is_sorted(order: np.ndarray) -> bool:
    return bool(np.all(order == np.arange(len(order))))


__all__ = ["FAIL", "INFO", "OK", "ElemArrays", "elem_arrays"]
