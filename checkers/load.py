"""A stored history read into what the local checks take, one row group at a time.

Each row group is decoded, turned into numpy columns at their final places, and dropped, so
the Arrow form of the history never exists in full (at 10M ops it was 1.3 GB beside the arrays
made from it; every fresh page costs a kernel fault, and on this kind of VM faults were the part
of the check that grew faster than the history).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from checkers.op_arrays import OpArrays, OpArraysBuilder
from checkers.queue.arrays import ElemArrays, ElemArraysBuilder
from history.columnar import SCHEMA, CheckInput, check_parts, op_rows_at_most, read_element_keys


@dataclass
class Loaded:
    elements: ElemArrays | None  # None unless asked for
    n_elements: int
    queue_ops: OpArrays
    wide_ops: pa.Table  # op rows with f in wide_fs or process in wide_processes: every column


def load(
    parquet: str | Path,
    wide_fs: list[str],
    wide_processes: list[str],
    *,
    elements: bool,
    pool: Executor | None = None,
) -> Loaded:
    """`elements`: build the element arrays (the local engine); otherwise only count them
    (Spark and the reference path read the elements their own way)."""
    elems = ElemArraysBuilder(read_element_keys(parquet), pool) if elements else None
    ops = OpArraysBuilder(op_rows_at_most(parquet))
    n_elements, wide = 0, []
    for part in _read_ahead(check_parts(parquet, wide_fs, wide_processes)):
        n_elements += part.elements.num_rows
        if elems is not None:
            elems.add(part.elements)
        ops.add(part.queue_ops)
        if part.wide_ops.num_rows:
            wide.append(part.wide_ops)
    wide_ops = pa.concat_tables(wide) if wide else SCHEMA.empty_table().drop_columns(["row"])
    return Loaded(elems.finish() if elems is not None else None, n_elements, ops.finish(), wide_ops)


def _read_ahead(parts: Iterator[CheckInput]) -> Iterator[CheckInput]:
    """The next part is decoded (by Arrow, which releases the GIL) while the caller turns the
    current one into arrays: decoding alone kept about one of two cores busy."""
    with ThreadPoolExecutor(1) as reader:
        pending = reader.submit(next, parts, None)
        while (part := pending.result()) is not None:
            pending = reader.submit(next, parts, None)
            yield part
