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
from checkers.queue.arrays import ElemArrays, elem_arrays
from checkers.queue.local import run_local
from checkers.queue.per_key import KeyResult
from checkers.queue.policy import apply_policy
from checkers.queue.vector import check_by_keys, vector_context
from history.columnar import elements, op_rows, read_elements, read_ops

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


def reset_ops(ops: pa.Table) -> list[tuple[str, int, str, list[int] | None]]:
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
    `slots`: worker slots sharing transactional ids (QueueContext.slots), None: not judged."""
    resets = reset_ops(read_ops(parquet, fs=RESET_FS))
    if spark is not None:
        from checkers.queue.spark import run_spark

        return run_spark(spark, str(parquet), resets, slots)
    elems = read_elements(parquet)
    if reference:
        return check_queue_reference(elems, resets, slots)
    return check_queue_vector(elems, resets, slots)


def check_queue_table(
    table: pa.Table, *, reference: bool = False, slots: int | None = None
) -> QueueResult:
    """On an in-memory columnar history (history.columnar.to_table)."""
    resets = reset_ops(op_rows(table, RESET_FS))
    elems = elements(table)
    if reference:
        return check_queue_reference(elems, resets, slots)
    return check_queue_vector(elems, resets, slots)


def check_queue_reference(
    elems: pa.Table,
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
) -> QueueResult:
    results, ctx = run_local(elems, resets, slots)
    return merge(results, ctx.subscribe)


def check_queue_vector(
    elems: pa.Table,
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
) -> QueueResult:
    return check_queue_arrays(elem_arrays(elems), resets, slots=slots)


def check_queue_arrays(
    arrays: ElemArrays,
    resets: list[tuple[str, int, str, list[int] | None]],
    pool: Executor | None = None,
    slots: int | None = None,
) -> QueueResult:
    """`arrays`: every element (arrays.elem_arrays); batches of keys run in `pool` if given."""
    ctx = vector_context(arrays, resets, slots)
    findings, edges, spans = check_by_keys(arrays, ctx, pool)
    return finish(findings, edges, ctx.subscribe, spans)
