"""Queue operations (send/poll/txn) as one row each: who ran them and when, for the cycle search."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from checkers.cycles import OpInfo, op_infos
from history.columnar import op_rows, read_ops
from history.format import QUEUE_FS

COLUMNS = ["index", "invoke_index", "type", "process", "time"]


def queue_ops_from_parquet(parquet: str | Path) -> list[OpInfo]:
    return op_infos(read_ops(parquet, fs=sorted(QUEUE_FS)).select(COLUMNS).to_pydict())


def queue_ops_from_table(table: pa.Table) -> list[OpInfo]:
    return op_infos(op_rows(table, sorted(QUEUE_FS)).select(COLUMNS).to_pydict())
