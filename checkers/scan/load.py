"""A stored history read into what the local checks take, one row group at a time.

Each row group is decoded, turned into numpy columns at their final places, and dropped, so
the Arrow form of the history never exists in full (at 10M ops it was 1.3 GB beside the arrays
made from it; every fresh page costs a kernel fault, and on this kind of VM faults were the part
of the check that grew faster than the history).

A history with more element rows than STREAM_ABOVE is streamed instead: its elements are not
held but spilled to disk in buckets of whole keys of at most BATCH_ELEMENTS rows each
(queue/spill.py), which the local engine then checks one at a time (queue/streamed.py). The
same one pass reads the history either way; docs/checkers.md ("Histories bigger than memory")
has the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from checkers.families.queue.arrays import PRODUCER_COLUMNS, ElemArrays, ElemArraysBuilder
from checkers.families.queue.spill import SpilledElements
from checkers.scan.op_arrays import OpArrays, OpArraysBuilder
from history.columnar import (
    ELEMENT_CHECK_COLUMNS,
    SCHEMA,
    CheckInput,
    check_parts,
    element_key_counts,
    element_rows_at_most,
    op_rows_at_most,
    read_element_keys,
    read_header,
)
from history.format import idempotent_producers

T = TypeVar("T")

# Element rows above which a history is streamed (about 25M ops of the usual mix of sends and
# polls). Below it the elements are held whole, the faster path (no spill to write and read
# back): at 10M ops 2.3 GB at peak, and about 230 bytes an element beyond, so that at this
# size a check holds about 5.5 GB. Read when `load` is called (tests lower it).
STREAM_ABOVE = 1 << 25
# Element rows per bucket of a streamed history: a bucket's arrays (76 bytes an element with
# its keys, 0.64 GB, reused bucket after bucket) beside the op arrays and the threads' check
# temporaries; at 100M ops the check then holds about 5.4 GB.
BATCH_ELEMENTS = 1 << 23


@dataclass
class Loaded:
    elements: ElemArrays | None  # None unless asked for (or streamed)
    n_elements: int
    queue_ops: OpArrays
    wide_ops: pa.Table  # op rows with f in wide_fs or process in wide_processes: every column
    spilled: SpilledElements | None = None  # the elements of a streamed history


def load(
    parquet: str | Path,
    wide_fs: list[str],
    wide_processes: list[str],
    *,
    elements: bool,
    pool: Executor | None = None,
    producers: bool | None = None,
    spill_to: Callable[[], Path] | None = None,
) -> Loaded:
    """`elements`: build the element arrays (the local engine); otherwise only count them
    (Spark and the reference path read the elements their own way). `producers`: the element
    arrays carry each send's producer and invocation index (arrays.PRODUCER_COLUMNS), for the
    producer-order rule; None: when the history's header declares idempotent producers
    (history.format.idempotent_producers), so that no other history decodes them.
    `spill_to`: where a history with more than STREAM_ABOVE element rows spills them (a
    directory, asked for only then; the caller removes it); None: never streamed."""
    if producers is None:
        producers = elements and idempotent_producers(read_header(parquet))
    streamed = elements and spill_to is not None and element_rows_at_most(parquet) > STREAM_ABOVE
    # The keys are read while the first parts (kchaos writes op rows first) are decoded: every
    # element's key (to place it), or for a streamed history how many elements each key has.
    count = element_key_counts if streamed else read_element_keys
    keys: Future[Any] | None = _later(pool, count, parquet) if elements else None
    elems: ElemArraysBuilder | SpilledElements | None = None

    def sink() -> ElemArraysBuilder | SpilledElements:
        assert keys is not None
        if streamed:
            assert spill_to is not None
            every, counts = keys.result()
            return SpilledElements(spill_to(), every, counts, BATCH_ELEMENTS, pool, producers)
        return ElemArraysBuilder(keys.result(), pool, producers)

    ops = OpArraysBuilder(op_rows_at_most(parquet))
    n_elements, wide = 0, []
    # Without elements only their number is needed: one narrow column of each part.
    columns = [c for c in ELEMENT_CHECK_COLUMNS if c != "key" or streamed] if elements else ["seq"]
    if elements and producers:
        columns += [c for c in PRODUCER_COLUMNS if c not in columns]
    for part in _read_ahead(check_parts(parquet, wide_fs, wide_processes, columns)):
        n_elements += part.elements.num_rows
        if elements and elems is None and part.elements.num_rows:
            elems = sink()
        # The ops are split in the pool beside the element columns: on the caller's thread
        # they waited for every element job.
        split = pool.submit(ops.add, part.queue_ops) if pool is not None else None
        if elems is not None and part.elements.num_rows:
            elems.add(part.elements)
        if split is None:
            ops.add(part.queue_ops)
        else:
            split.result()
        if part.wide_ops.num_rows:
            wide.append(part.wide_ops)
    wide_ops = pa.concat_tables(wide) if wide else SCHEMA.empty_table().drop_columns(["row"])
    if elements and elems is None:  # a history without elements
        elems = sink()
    if isinstance(elems, SpilledElements):
        return Loaded(None, n_elements, ops.finish(), wide_ops, elems.finish())
    return Loaded(elems.finish() if elems is not None else None, n_elements, ops.finish(), wide_ops)


def _later(pool: Executor | None, fn: Callable[..., T], *args: Any) -> Future[T]:
    """fn(*args) in `pool`, or now when there is none."""
    if pool is not None:
        return pool.submit(fn, *args)
    done: Future[T] = Future()
    done.set_result(fn(*args))
    return done


def _read_ahead(parts: Iterator[CheckInput]) -> Iterator[CheckInput]:
    """The next part is decoded (by Arrow, which releases the GIL) while the caller turns the
    current one into arrays: decoding alone kept about one of two cores busy."""
    with ThreadPoolExecutor(1) as reader:
        pending = reader.submit(next, parts, None)
        while (part := pending.result()) is not None:
            pending = reader.submit(next, parts, None)
            yield part
