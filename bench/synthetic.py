"""Synthetic valid queue histories of any size, built as columns (no JSONL round trip).

P processes each own one key and repeat: send, send, poll (reading those two records).
Op j (global, in time order) is run by process j % P; ops do not overlap in time. The value
of each op row (`value_json`) is left null: the checkers never read it for queue ops.

The history is made and written a slice of ops at a time (`write_synthetic`), so that a
100M-op history never exists in memory whole: every column is a function of the op number j,
and the dictionary columns are built from their codes (decoding and re-encoding 10M strings
was most of the old generator's 48 s). The file is laid out as kchaos writes one: every op row
(in index order), then every element row (in (index, seq) order), in row groups of ROW_GROUP
rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from history.columnar import SCHEMA

STEP_NS = 100
PROCESSES = 64
ROW_GROUP = 1 << 20
# Ops per slice: a slice's columns are a few hundred MB at most.
SLICE = 1 << 20


def _size(n_ops: int, processes: int) -> tuple[int, int]:
    """(ops per process, ops in all): whole rounds of send, send, poll."""
    per = max(3, n_ops // processes // 3 * 3)
    return per, per * processes


def write_synthetic(path: str | Path, n_ops: int, processes: int = PROCESSES) -> int:
    """Writes history.parquet with about n_ops operations, a slice at a time; returns the
    exact count of ops (each an invocation and its ok completion)."""
    _, n = _size(n_ops, processes)
    with pq.ParquetWriter(path, SCHEMA) as out:
        held: list[pa.Table] = []
        rows = 0
        for part in _slices(n_ops, processes):
            held.append(part)
            rows += part.num_rows
            if rows >= ROW_GROUP:
                # Only whole row groups are written; the rest waits for the next slice, so the
                # row groups are those of one write of the whole table.
                table = pa.concat_tables(held)
                whole = rows // ROW_GROUP * ROW_GROUP
                out.write_table(table.slice(0, whole), row_group_size=ROW_GROUP)
                held, rows = [table.slice(whole)], rows - whole
        if rows:
            out.write_table(pa.concat_tables(held), row_group_size=ROW_GROUP)
    return n


def _slices(n_ops: int, processes: int) -> Iterator[pa.Table]:
    """The op rows of every op, then the element rows of every op, SLICE ops at a time."""
    per, n = _size(n_ops, processes)
    for lo in range(0, n, SLICE):
        yield _op_rows(np.arange(lo, min(n, lo + SLICE), dtype=np.int64), processes)
    for lo in range(0, n, SLICE):
        yield _element_rows(np.arange(lo, min(n, lo + SLICE), dtype=np.int64), processes, per)


def _codes(codes: np.ndarray, names: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(
        pa.array(codes.astype(np.int32, copy=False)), pa.array(names, pa.string())
    )


def _process_names(processes: int) -> list[str]:
    return [str(p) for p in range(processes)]


def _op_rows(j: np.ndarray, processes: int) -> pa.Table:
    """Each op's invocation (index 2j) and ok completion (index 2j+1)."""
    p, s = j % processes, j // processes
    is_poll = s % 3 == 2
    index = np.arange(2 * j[0], 2 * j[-1] + 2, dtype=np.int64) if len(j) else j
    both = np.repeat
    cols = {
        "row": _codes(np.zeros(2 * len(j)), ["op"]),
        "index": pa.array(index),
        # The completion names its invocation; the invocation names none.
        "invoke_index": pa.array(index - 1, mask=index % 2 == 0),
        "type": _codes(np.tile([0, 1], len(j)), ["invoke", "ok"]),
        "f": _codes(both(is_poll, 2), ["send", "poll"]),
        "process": _codes(both(p, 2), _process_names(processes)),
        "time": pa.array(np.ravel(np.column_stack([j * STEP_NS, j * STEP_NS + STEP_NS // 2]))),
    }
    return _table(cols, 2 * len(j))


def _element_rows(j: np.ndarray, processes: int, per: int) -> pa.Table:
    """A send's one element, and a poll's two (the records its process just sent), in
    (index, seq) order."""
    p, s = j % processes, j // processes
    is_poll = s % 3 == 2
    count = np.where(is_poll, 2, 1)
    op = np.repeat(np.arange(len(j)), count)  # each element's op, in j order
    first = np.cumsum(count) - count
    seq = np.arange(len(op)) - first[op]
    polled = is_poll[op]
    send_no = ((s // 3) * 2 + (s % 3))[op]
    value = (p * per + s)[op]
    ej = j[op]
    # A poll's elements read the two sends before it: offsets send_no-2, send_no-1.
    back = np.where(polled, 2 - seq, 0)
    cols = {
        "row": _codes(np.zeros(len(op)), ["elem"]),
        "index": pa.array(2 * ej + 1),
        "invoke_index": pa.array(2 * ej),
        "type": _codes(np.zeros(len(op)), ["ok"]),
        "f": _codes(polled, ["send", "poll"]),
        "process": _codes(p[op], _process_names(processes)),
        "time": pa.array(ej * STEP_NS + STEP_NS // 2),
        "invoke_time": pa.array(ej * STEP_NS),
        "mop": pa.array(np.zeros(len(op), dtype=np.int32)),
        "seq": pa.array(seq.astype(np.int32)),
        "kind": _codes(polled, ["send", "poll"]),
        "key": pa.array(p[op]),
        "offset": pa.array(send_no - back),
        "value": pa.array(value - back),
        "rebalanced": pa.array(np.zeros(len(op), dtype=bool)),
    }
    return _table(cols, len(op))


def _table(cols: dict[str, pa.Array], n: int) -> pa.Table:
    arrays = [cols.get(f.name, pa.nulls(n, type=f.type)) for f in SCHEMA]
    return pa.Table.from_arrays(
        [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, SCHEMA, strict=True)],
        schema=SCHEMA,
    )
