"""Queue operations (send/poll/txn) as one row each: who ran them and when, for the cycle search."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from checkers.scan.op_arrays import OpArrays, op_arrays
from history.columnar import QUEUE_OP_COLUMNS as COLUMNS
from history.columnar import op_rows, read_ops
from history.format import QUEUE_FS


def queue_ops_from_parquet(parquet: str | Path) -> OpArrays:
    return op_arrays(read_ops(parquet, fs=sorted(QUEUE_FS), columns=COLUMNS))


def queue_ops_from_table(table: pa.Table) -> OpArrays:
    return op_arrays(op_rows(table, sorted(QUEUE_FS)).select(COLUMNS))
