"""The queue checks of a stored or in-memory history: which ops reset a consumer's position
(`queue_resets`), then one engine by name (dispatch.run_engine, the single entry point).

The two functions below `queue_resets` check a stored or in-memory history whole (tests, bench):
each names its engine and goes through dispatch.run_engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from checkers.families.queue.arrays import PRODUCER_COLUMNS
from checkers.families.queue.context import Resets, abort_resets
from checkers.families.queue.dispatch import run_engine
from checkers.families.queue.result import QueueResult
from checkers.families.queue.source import ElementSource
from checkers.scan.op_arrays import OpArrays
from checkers.scan.queue_ops import queue_ops_from_parquet, queue_ops_from_table
from history.columnar import (
    ELEM_ROW,
    ELEMENT_COLUMNS,
    elements,
    header_of,
    is_in,
    op_rows,
    read_header,
    read_ops,
)
from history.format import FAIL, INFO, UNDECLARED, after_abort_rule, idempotent_producers

__all__ = [
    "RESET_FS",
    "QueueResult",
    "Resets",
    "check_queue",
    "check_queue_table",
    "queue_resets",
    "reset_ops",
]

RESET_FS = ["assign", "subscribe", "crash"]


def reset_ops(ops: pa.Table) -> Resets:
    """Assign/subscribe/crash ops that may have taken effect (not failed), with the kept keys."""
    out = []
    for r in ops.select(["process", "index", "f", "type", "value_json"]).to_pylist():
        if r["f"] not in RESET_FS or r["type"] not in ("ok", "info"):
            continue
        keys = json.loads(r["value_json"]) if r["value_json"] else None
        # Anything but a plain list of keys: forget every position (never a false alarm).
        if not isinstance(keys, list) or not all(isinstance(k, int) for k in keys):
            keys = None
        out.append((r["process"], r["index"], r["f"], keys))
    return out


def queue_resets(reset_rows: pa.Table, ops: OpArrays, after_abort: str) -> Resets:
    """Every op after which a process's consumer position may legitimately jump: the
    assign/subscribe/crash ops of `reset_rows`, and for histories whose writer did not say
    where an aborted transaction leaves the consumer, every non-ok queue op of `ops`: in those
    (UNDECLARED) histories a `fail` transaction recorded its invocation, not what its polls
    returned, so after it the process's position on every key is unknown (no element shows such
    a poll: it returned nothing the history holds)."""
    resets = reset_ops(reset_rows)
    if after_abort != UNDECLARED:
        return resets
    codes = [i for i, name in enumerate(ops.type_names) if name in (FAIL, INFO)]
    rows = np.flatnonzero(np.isin(ops.typ, codes))
    procs = [str(ops.proc_names[p]) for p in ops.proc[rows].tolist()]
    return resets + abort_resets(procs, ops.index[rows].tolist())


def check_queue(
    parquet: str | Path,
    spark: Any = None,
    *,
    reference: bool = False,
    slots: int | None = None,
) -> QueueResult:
    """All queue anomalies of a Parquet history; `spark`: a SparkSession (the Spark engine),
    None for local. `reference`: the reference engine (slow; the yardstick).
    `slots`: worker slots sharing transactional ids (QueueContext.slots), None: not judged.
    The poll rule after aborts, and whether one producer's send order is judged, follow the
    history's header (history.format.after_abort_rule, idempotent_producers).
    """
    header = read_header(parquet)
    rule = after_abort_rule(header)
    resets = queue_resets(read_ops(parquet, fs=RESET_FS), queue_ops_from_parquet(parquet), rule)
    name = "spark" if spark is not None else "reference" if reference else "local"
    source = ElementSource(parquet=parquet, spark=spark, producers=idempotent_producers(header))
    return run_engine(name, source, resets, slots, rule)


def check_queue_table(
    table: pa.Table,
    *,
    reference: bool = False,
    slots: int | None = None,
    after_abort: str | None = None,
) -> QueueResult:
    """On an in-memory columnar history (history.columnar.to_table); `after_abort`: the poll
    rule after aborts, by default the one the history's header asks for. One producer's send
    order is judged when the header declares idempotent producers."""
    header = header_of(table.schema)
    if after_abort is None:
        after_abort = after_abort_rule(header)
    resets = queue_resets(op_rows(table, RESET_FS), queue_ops_from_table(table), after_abort)
    producers = idempotent_producers(header)
    if producers:
        columns = [*ELEMENT_COLUMNS, *(c for c in PRODUCER_COLUMNS if c not in ELEMENT_COLUMNS)]
        elems = table.filter(is_in(table.column("row"), [ELEM_ROW])).select(columns)
    else:
        elems = elements(table)
    source = ElementSource(elements=elems, producers=producers)
    return run_engine("reference" if reference else "local", source, resets, slots, after_abort)
