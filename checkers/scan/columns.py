"""Arrow columns as numpy arrays, read from Arrow's buffers: fixed-width values with their
validity, strings as dictionary codes. Shared by the element arrays (queue/arrays.py) and the
queue op arrays (op_arrays.py), which decode millions of rows each."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def fixed_width(
    col: pa.ChunkedArray | pa.Array, dtype: type
) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, 0 where null; validity, None when nothing is null) of a fixed-width column of
    numpy type `dtype`, read from Arrow's buffers: values without a copy, validity unpacked
    from the bitmap. Arrow's own fill_null and is_valid took 40 ms per million rows here,
    more than the rest of a part's decoding."""
    if col.type != pa.from_numpy_dtype(dtype):
        col = col.cast(pa.from_numpy_dtype(dtype))
    chunks = [col] if isinstance(col, pa.Array) else col.chunks
    parts = [_fixed_chunk(c, dtype) for c in chunks if len(c)]
    if not parts:
        return np.zeros(0, dtype=dtype), None
    if len(parts) == 1:
        return parts[0]
    values = np.concatenate([v for v, _ in parts])
    if all(m is None for _, m in parts):
        return values, None
    valid = [np.ones(len(v), dtype=bool) if m is None else m for v, m in parts]
    return values, np.concatenate(valid)


def _fixed_chunk(a: pa.Array, dtype: type) -> tuple[np.ndarray, np.ndarray | None]:
    n, off = len(a), a.offset
    validity, data = a.buffers()[:2]
    values = np.frombuffer(data, dtype=dtype, count=off + n)[off:]
    if a.null_count == 0 or validity is None:
        return values, None
    valid = np.unpackbits(np.frombuffer(validity, np.uint8), count=off + n, bitorder="little")
    valid = valid[off:].view(bool)
    return np.where(valid, values, 0).astype(dtype, copy=False), valid


def to_numpy(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """One copy at most (a chunked column is concatenated straight into numpy)."""
    if isinstance(col, pa.ChunkedArray) and col.num_chunks == 1:
        col = col.chunk(0)
    return (
        col.to_numpy(zero_copy_only=False) if len(col) else np.zeros(0, col.type.to_pandas_dtype())
    )


class CodeBook:
    """String columns as int32 codes into one list of names that grows chunk by chunk (in
    order of first appearance; code 0 is null). Each chunk's small dictionary is mapped onto
    the names by a lookup table, so millions of rows are never decoded to strings."""

    def __init__(self) -> None:
        self.names: list[str | None] = [None]
        self._seen: dict[str, int] = {}

    def encode(self, col: pa.ChunkedArray | pa.Array) -> np.ndarray:
        chunks = [col] if isinstance(col, pa.Array) else col.chunks
        if not pa.types.is_dictionary(col.type):
            chunks = [pc.dictionary_encode(c.cast(pa.string())) for c in chunks]
        parts = []
        for c in chunks:
            lut = np.array([*map(self._code, c.dictionary.to_pylist())], dtype=np.int32)
            at, valid = fixed_width(c.indices, np.int32)
            codes = lut[at] if len(lut) else np.zeros(len(at), dtype=np.int32)
            if valid is not None:
                codes[~valid] = 0
            parts.append(codes)
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)

    def _code(self, word: str) -> int:
        if word not in self._seen:
            self._seen[word] = len(self.names)
            self.names.append(word)
        return self._seen[word]


def is_name(codes: np.ndarray, names: list[str | None], name: str) -> np.ndarray:
    """Which rows of a CodeBook-coded column hold `name`."""
    hits = [c for c, n in enumerate(names) if n == name]
    if len(hits) == 1:  # the usual case: a compare streams where a lookup table gathers
        return codes == hits[0]
    table = np.array([n == name for n in names] + [False])  # codes index names: a lookup
    return table[codes] if table.any() else np.zeros(len(codes), dtype=bool)


def narrowed(x: np.ndarray) -> tuple[np.ndarray, int]:
    """(stored, base): an integer column as offsets from its least value in the narrowest
    unsigned type that holds them (x == stored + base), for a spill to write fewer bytes:
    op indices, times, offsets and values of one part of a history span far less than their
    type holds. Columns of another kind, or too wide a span, stay as they are (base 0)."""
    if len(x) == 0 or x.dtype.kind not in "iu":
        return x, 0
    lo, hi = int(x.min()), int(x.max())
    for t in (np.uint8, np.uint16, np.uint32):
        if hi - lo <= np.iinfo(t).max:
            return np.subtract(x, lo, dtype=np.int64).astype(t), lo
    return x, 0


def widened(stored: np.ndarray, base: int, out: np.ndarray) -> None:
    """Undo `narrowed` into `out` (of the column's own type)."""
    if base == 0 and stored.dtype == out.dtype:
        out[...] = stored
    else:
        np.add(stored, base, out=out, dtype=np.int64, casting="unsafe")
