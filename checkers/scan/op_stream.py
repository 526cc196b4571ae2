"""Op rows as Python dicts a batch at a time, from an Arrow table of op rows.

A checker that reads every send of a history (millions in a queue run) must not turn them into
one dict per op at once: a dict of every column costs about a kilobyte, so 15M send rows would
hold 15 GB. `OpRows` answers the same rows, in the same order and with the same values as
`table.to_pylist()`, but only `BATCH_ROWS` of them live at a time, and only the columns asked
for; it can be iterated again (each pass decodes anew).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history.columnar import FIELDS_COLUMN, is_in

BATCH_ROWS = 65_536


def select(table: pa.Table, columns: Iterable[str]) -> pa.Table:
    """The table's `columns` that it has (a table without one answers None for it)."""
    return table.select([c for c in columns if c in table.column_names])


def where_in(table: pa.Table, column: str, names: Iterable[str]) -> pa.Table:
    """The rows whose string `column` is one of `names` (dictionary columns read cheaply)."""
    if column not in table.column_names or table.num_rows == 0:
        return table.slice(0, 0)
    return table.filter(is_in(table.column(column), list(names)))


class OpRows:
    """The rows of an Arrow table as dicts, `BATCH_ROWS` at a time; re-iterable."""

    def __init__(self, table: pa.Table, batch_rows: int = BATCH_ROWS) -> None:
        self.table = table
        self.batch_rows = batch_rows

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __bool__(self) -> bool:
        return self.table.num_rows > 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.table.to_batches(max_chunksize=self.batch_rows):
            yield from batch.to_pylist()


def int_column(table: pa.Table, column: str, fill: int = -1) -> np.ndarray:
    """An int64 column as numpy, nulls as `fill`."""
    col = table.column(column).combine_chunks()
    return np.asarray(col.fill_null(fill), dtype=np.int64)


def with_fields(table: pa.Table) -> pa.Table:
    """The rows that carry op fields (history.columnar.FIELDS_COLUMN, non-empty): the only ones
    `op_rows.row_fields` answers anything but {} for."""
    if FIELDS_COLUMN not in table.column_names:
        return table.slice(0, 0)
    col = table.column(FIELDS_COLUMN)
    return table.filter(pc.fill_null(pc.greater(pc.utf8_length(col), 0), False))
