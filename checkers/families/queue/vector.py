"""The local engine: every rule's vectorised form (rules/) over batches of whole keys, numpy in
this process. Same findings as the reference engine (per_key.py), wording and data included:
every rule's two forms sit side by side in its module and share its wording, and
tests/unit/checkers/test_queue_vector.py holds the engines to each other. The version order
every vectorised form reads is logs.Logs; Python objects are made only for the rows a finding
quotes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor

import numpy as np

from checkers.core.findings import Finding
from checkers.families.edges import EdgeArrays
from checkers.families.queue import dependencies
from checkers.families.queue.arrays import ElemArrays
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import INFO, Elem
from checkers.families.queue.logs import Logs, runs
from checkers.families.queue.result import QueueResult, finish
from checkers.families.queue.rules import RULES
from checkers.families.queue.source import ElementSource
from checkers.scan.npsets import member


class LocalEngine:
    """engine.QueueEngine over element arrays (arrays.ElemArrays)."""

    def __init__(self, source: ElementSource) -> None:
        self.arrays = source.element_arrays()
        self.pool = source.pool

    def info_sends(self) -> list[tuple[int, int, int]]:
        return info_sends(self.arrays)

    def polled_among(self, values: list[int]) -> Iterable[tuple[int, int]]:
        return polled_among(self.arrays, values)

    def sends_among(self, values: list[int]) -> list[tuple[int, Elem]]:
        return sends_among(self.arrays, values)

    def check(self, ctx: QueueContext) -> QueueResult:
        findings, edges, spans = check_by_keys(self.arrays, ctx, self.pool)
        return finish(findings, edges, ctx.subscribe, spans)


def info_sends(a: ElemArrays) -> list[tuple[int, int, int]]:
    """engine.ElementFacts.info_sends of the rows of `a`."""
    info = np.flatnonzero(a.is_kind("send") & a.is_type(INFO) & a.has_val)
    return list(zip(*(x[info].tolist() for x in (a.index, a.key, a.value)), strict=True))


def polled_among(a: ElemArrays, values: list[int]) -> Iterable[tuple[int, int]]:
    """engine.ElementFacts.polled_among of the rows of `a`."""
    polls = np.flatnonzero(a.is_kind("poll") & a.has_val)
    polls = polls[member(a.value[polls], np.array(values, dtype=np.int64))]
    return zip(a.key[polls].tolist(), a.value[polls].tolist(), strict=True)


def sends_among(a: ElemArrays, values: list[int]) -> list[tuple[int, Elem]]:
    """engine.ElementFacts.sends_among of the rows of `a`."""
    sends = np.flatnonzero(a.is_kind("send") & a.has_val)
    sends = sends[member(a.value[sends], np.array(values, dtype=np.int64))]
    return [(int(a.key[i]), a.elem(int(i))) for i in sends]


# Elements per call of check_arrays: whole keys at a time, so that its temporaries stay small
# (reused memory, caches) however long the history; every rule is decided within one key. A
# batch's temporaries (about 250 bytes an element) must fit one of glibc's 64 MB per-thread
# heaps: a batch that overflows into a second heap frees it whole, and the next batch faults
# it in again (2^18: 34k faults at 1M ops, 2^17: 20k).
CHUNK = 1 << 17


def workers() -> int:
    """Threads for batches of keys: numpy and Arrow release the GIL in the passes that cost."""
    return max(1, min(4, os.cpu_count() or 1))


def check_by_keys(
    a: ElemArrays, ctx: QueueContext, pool: Executor | None = None
) -> tuple[list[Finding], list[EdgeArrays], np.ndarray]:
    """check_arrays over runs of whole keys of about CHUNK elements each (in `pool`, when
    given); the same findings, and the same edges in the same order (ww edges of every key,
    then wr edges, keys ascending) in parts that EdgeArrays.concat would join."""
    findings, ww, wr, spans = check_batches(a, ctx, pool)
    return findings, ww + wr, spans


def check_batches(
    a: ElemArrays, ctx: QueueContext, pool: Executor | None = None
) -> tuple[list[Finding], list[EdgeArrays], list[EdgeArrays], np.ndarray]:
    """check_by_keys, with the ww and the wr edges in parts of their own: (findings, ww parts,
    wr parts, back spans)."""
    results = list(checked_pieces(a, ctx, pool))
    findings = [f for r in results for f in r[0]]
    spans = np.concatenate([r[3] for r in results], axis=1)
    return findings, [r[1] for r in results], [r[2] for r in results], spans


Checked = tuple[list[Finding], EdgeArrays, EdgeArrays, np.ndarray]


def checked_pieces(
    a: ElemArrays, ctx: QueueContext, pool: Executor | None = None
) -> Iterator[Checked]:
    """(findings, ww edges, wr edges, back spans) of each run of whole keys of about CHUNK
    elements, in key order, each as soon as it and those before it are done (in `pool`, when
    given): a caller that writes the edges away holds few pieces' at once."""
    starts = runs(a.key)
    # Batches of about CHUNK, as many as make every thread's share equal: at 1M ops, five
    # batches on two threads left one thread idle for a fifth of the checks.
    share = CHUNK * (workers() if pool is not None else 1)
    size = max(1, -(-len(a) // (-(-len(a) // share) * (share // CHUNK)))) if len(a) else 1
    bounds, lo = [], 0
    while True:  # one step per run: the first key starting `size` rows or more after lo
        at = int(np.searchsorted(starts, lo + size))
        if at >= len(starts):
            break
        bounds.append((lo, int(starts[at])))
        lo = int(starts[at])
    bounds.append((lo, len(a)))

    def one(bound: tuple[int, int]) -> Checked:
        return _check(a.slice(*bound), ctx)

    if len(bounds) == 1 or pool is None:
        yield from (one(b) for b in bounds)
    else:
        yield from pool.map(one, bounds)


def check_arrays(a: ElemArrays, ctx: QueueContext) -> tuple[list[Finding], EdgeArrays]:
    """Every queue anomaly of every key in `a`, and the ww/wr edges."""
    findings, ww, wr, _ = _check(a, ctx)
    return findings, EdgeArrays.concat([ww, wr])


def _check(
    a: ElemArrays, ctx: QueueContext
) -> tuple[list[Finding], EdgeArrays, EdgeArrays, np.ndarray]:
    """(findings, ww edges, wr edges, back spans): the edges kept apart, as the caller keeps
    them in parts (a join would copy millions of edges for nothing); the spans as
    `dependencies.back_spans` gives them."""
    if len(a) == 0:
        return [], EdgeArrays.empty(), EdgeArrays.empty(), np.zeros((2, 0), dtype=np.int64)
    logs = Logs(a, ctx)
    findings = [f for rule in RULES for f in rule.vectorised(logs, ctx)]
    return findings, *dependencies.vectorised(logs)
