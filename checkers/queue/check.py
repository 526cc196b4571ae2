"""The queue checks of a history, on pandas or on Spark: the same per-key code either way."""

from __future__ import annotations

import json
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from checkers.edges import EdgeArrays
from checkers.findings import Finding
from checkers.op_arrays import OpArrays
from checkers.queue.arrays import ElemArrays, elem_arrays
from checkers.queue.context import abort_resets
from checkers.queue.local import run_local
from checkers.queue.per_key import KeyResult
from checkers.queue.policy import apply_policy
from checkers.queue.vector import check_by_keys, vector_context
from checkers.queue_ops import queue_ops_from_parquet, queue_ops_from_table
from history.columnar import (
    elements,
    header_of,
    op_rows,
    read_elements,
    read_header,
    read_ops,
)
from history.format import FAIL, INFO, UNDECLARED, after_abort_rule

RESET_FS = ["assign", "subscribe", "crash"]


@dataclass
class QueueResult:
    findings: list[Finding] = field(default_factory=list)
    # The edges in parts, in order (one per batch of keys): the cycle search reads them part
    # by part, and a copy of millions of edges into one set of arrays is made only if asked.
    edge_parts: list[EdgeArrays] = field(default_factory=list)
    subscribe: bool = False
    # [lo, hi] invocation-time spans of the edges that go back in time, when the checks made
    # them (cycles.find_cycles); None: the cycle search finds them itself.
    back_spans: np.ndarray | None = None

    @property
    def edges(self) -> EdgeArrays:
        if len(self.edge_parts) != 1:
            self.edge_parts = [EdgeArrays.concat(self.edge_parts)]
        return self.edge_parts[0]


Resets = list[tuple[str, int, str, list[int] | None]]


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
    where an aborted transaction leaves the consumer, every non-ok queue op of `ops`."""
    codes = [i for i, name in enumerate(ops.type_names) if name in (FAIL, INFO)]
    rows = np.flatnonzero(np.isin(ops.typ, codes)) if codes else np.zeros(0, dtype=np.int64)
    return reset_ops(reset_rows) + abort_resets(
        [str(ops.proc_names[p]) for p in ops.proc[rows].tolist()],
        ops.index[rows].tolist(),
        [str(ops.type_names[t]) for t in ops.typ[rows].tolist()],
        after_abort,
    )


def merge(results: list[KeyResult], subscribe: bool) -> QueueResult:
    findings = [f for r in results for f in r.findings]
    edges = EdgeArrays.from_edges(e for r in results for e in r.edges)
    return finish(findings, edges, subscribe)


def finish(
    findings: list[Finding],
    edges: EdgeArrays | list[EdgeArrays],
    subscribe: bool,
    back_spans: np.ndarray | None = None,
) -> QueueResult:
    findings = sorted(apply_policy(findings, subscribe), key=Finding.sort_key)
    parts = [edges] if isinstance(edges, EdgeArrays) else edges
    return QueueResult(findings, parts, subscribe, back_spans)


def check_queue(
    parquet: str | Path,
    spark: Any = None,
    *,
    reference: bool = False,
    slots: int | None = None,
) -> QueueResult:
    """All queue anomalies of a Parquet history; `spark`: a SparkSession, None for local.
    `reference`: the per-key Python path (slow; the yardstick the fast paths are tested on).
    `slots`: worker slots sharing transactional ids (QueueContext.slots), None: not judged.
    The poll rule after aborts follows the history's header (history.format.after_abort_rule).
    """
    rule = after_abort_rule(read_header(parquet))
    resets = queue_resets(read_ops(parquet, fs=RESET_FS), queue_ops_from_parquet(parquet), rule)
    if spark is not None:
        from checkers.queue.spark import run_spark

        return run_spark(spark, str(parquet), resets, slots, rule)
    elems = read_elements(parquet)
    if reference:
        return check_queue_reference(elems, resets, slots, rule)
    return check_queue_vector(elems, resets, slots, rule)


def check_queue_table(
    table: pa.Table,
    *,
    reference: bool = False,
    slots: int | None = None,
    after_abort: str | None = None,
) -> QueueResult:
    """On an in-memory columnar history (history.columnar.to_table); `after_abort`: the poll
    rule after aborts, by default the one the history's header asks for."""
    if after_abort is None:
        after_abort = after_abort_rule(header_of(table.schema))
    resets = queue_resets(op_rows(table, RESET_FS), queue_ops_from_table(table), after_abort)
    elems = elements(table)
    if reference:
        return check_queue_reference(elems, resets, slots, after_abort)
    return check_queue_vector(elems, resets, slots, after_abort)


def check_queue_reference(
    elems: pa.Table,
    resets: Resets,
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> QueueResult:
    results, ctx = run_local(elems, resets, slots, after_abort)
    return merge(results, ctx.subscribe)


def check_queue_vector(
    elems: pa.Table,
    resets: Resets,
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> QueueResult:
    return check_queue_arrays(elem_arrays(elems), resets, slots=slots, after_abort=after_abort)


def check_queue_arrays(
    arrays: ElemArrays,
    resets: Resets,
    pool: Executor | None = None,
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> QueueResult:
    """`arrays`: every element (arrays.elem_arrays); batches of keys run in `pool` if given."""
    ctx = vector_context(arrays, resets, slots, after_abort)
    findings, edges, spans = check_by_keys(arrays, ctx, pool)
    return finish(findings, edges, ctx.subscribe, spans)
