"""Where an engine finds a history's queue elements: the caller gives the forms it already
holds, and each engine takes the one it works on (dispatch.run_engine)."""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkers.queue.arrays import ElemArrays, elem_arrays
from history.columnar import read_elements


@dataclass(frozen=True)
class ElementSource:
    # Element rows (history.columnar.elements, read_elements): the reference engine's input.
    elements: pa.Table | None = None
    # Already decoded element arrays (checkers.load): the local engine's input.
    arrays: ElemArrays | None = None
    # The stored history: what the Spark engine reads, and the others when given nothing else.
    parquet: str | Path | None = None
    # A SparkSession, for the Spark engine.
    spark: Any = None
    # Threads for the local engine's batches of keys (vector.workers()), None: this thread.
    pool: Executor | None = None

    def element_table(self) -> pa.Table:
        if self.elements is not None:
            return self.elements
        if self.parquet is None:
            raise ValueError("no elements: give element rows or a Parquet history")
        return read_elements(self.parquet)

    def element_arrays(self) -> ElemArrays:
        if self.arrays is not None:
            return self.arrays
        return elem_arrays(self.element_table())

    def parquet_path(self) -> str:
        if self.parquet is None:
            raise ValueError("the Spark engine reads a Parquet history: none given")
        return str(self.parquet)
