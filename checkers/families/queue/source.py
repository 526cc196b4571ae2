"""Where an engine finds a history's queue elements: the caller gives the forms it already
holds, and each engine takes the one it works on (dispatch.run_engine)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkers.families.queue.arrays import PRODUCER_COLUMNS, ElemArrays, elem_arrays
from checkers.families.queue.spill import SpilledElements
from checkers.scan.spark_session import spark_path
from history.columnar import ELEMENT_COLUMNS, read_elements


@dataclass(frozen=True)
class ElementSource:
    # Element rows (history.columnar.elements, read_elements): the reference engine's input.
    elements: pa.Table | None = None
    # Already decoded element arrays (checkers.scan.load): the local engine's input.
    arrays: ElemArrays | None = None
    # The elements of a history too big to hold, spilled in buckets of whole keys
    # (checkers.scan.load streams a history above its threshold): the local engine checks them
    # bucket by bucket (streamed.StreamedEngine).
    spilled: SpilledElements | None = None
    # The stored history: what the Spark engine reads, and the others when given nothing else.
    parquet: str | Path | None = None
    # A SparkSession, for the Spark engine.
    spark: Any = None
    # Threads for the local engine's batches of keys (vector.workers()), None: this thread.
    pool: Executor | None = None
    # The history's header declares idempotent pipelined producers
    # (history.format.idempotent_producers): every engine carries each send's producer and
    # invocation index (arrays.PRODUCER_COLUMNS) and judges the producer-order rule. False: it
    # reads neither, and no history without producers pays for them.
    producers: bool = False

    def element_table(self) -> pa.Table:
        if self.elements is not None:
            table = self.elements
        elif self.parquet is None:
            raise ValueError("no elements: give element rows or a Parquet history")
        elif self.producers:
            table = read_elements(self.parquet, _with_producers(ELEMENT_COLUMNS))
        else:
            table = read_elements(self.parquet)
        if self.producers:
            _require(c in table.column_names for c in PRODUCER_COLUMNS)
        return table

    def element_arrays(self) -> ElemArrays:
        if self.arrays is not None:
            arrays = self.arrays
        else:
            arrays = elem_arrays(self.element_table(), producers=self.producers)
        if self.producers:
            _require([arrays.producer is not None and arrays.invoke_index is not None])
        return arrays

    def check_columns(self, columns: list[str]) -> list[str]:
        """`columns`, with what the producer-order rule reads when it is judged."""
        return _with_producers(columns) if self.producers else list(columns)

    def parquet_path(self) -> str:
        if self.parquet is None:
            raise ValueError("the Spark engine reads a Parquet history: none given")
        return spark_path(self.parquet)


def _with_producers(columns: list[str]) -> list[str]:
    return [*columns, *(c for c in PRODUCER_COLUMNS if c not in columns)]


def _require(present: Iterable[bool]) -> None:
    # The caller said the header promises producer order: elements without producers would
    # let the rule pass silently.
    if not all(present):
        raise ValueError(
            "the history declares idempotent producers, but its elements carry no "
            f"{' and '.join(PRODUCER_COLUMNS)}"
        )
