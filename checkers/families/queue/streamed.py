"""The local engine over a history too big to hold: the same vectorised checks (vector.py), one
bucket of whole keys at a time, loaded from the history's spill (spill.SpilledElements), and
the edges written to disk as each bucket makes them (edges.EdgeSpill). What it holds at once:
one bucket's element arrays and what its check makes, the findings so far, and the back spans
of the edges (few: the edges that go back in invocation time). docs/checkers.md ("Histories
bigger than memory") says when a check streams and what it costs.

Every rule is decided within one key and a key is never split between buckets, so each
bucket's check finds what the in-memory check finds for its keys; buckets follow the keys'
order, so the findings and the edges come in the in-memory check's order (ww edges of every
key, then wr edges, keys ascending). The cross-key facts are asked before the check (info
sends, collected while spilling; the polls of their values, from three columns of each
bucket) and after it (the sends of garbage-read values, from the buckets that hold one).
tests/unit/checkers/test_streamed.py holds this engine to the in-memory one and the reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from tempfile import mkdtemp

import numpy as np

from checkers.families.edges import EdgeSpill
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import Elem
from checkers.families.queue.result import QueueResult, finish
from checkers.families.queue.source import ElementSource
from checkers.families.queue.spill import SpilledElements
from checkers.families.queue.vector import checked_pieces, sends_among
from checkers.scan.npsets import member


class StreamedEngine:
    """engine.QueueEngine over spilled elements (ElementSource.spilled)."""

    def __init__(self, source: ElementSource) -> None:
        if source.spilled is None:
            raise ValueError("the streamed engine reads spilled elements: none given")
        self.spilled: SpilledElements = source.spilled
        self.pool = source.pool

    def info_sends(self) -> list[tuple[int, int, int]]:
        return self.spilled.info_sends()

    def polled_among(self, values: list[int]) -> Iterable[tuple[int, int]]:
        want = np.array(values, dtype=np.int64)
        kinds = self.spilled.names_of("kind")
        poll = [c for c, name in enumerate(kinds) if name == "poll"]
        out: list[tuple[int, int]] = []
        for b in range(len(self.spilled)):
            cols = self.spilled.columns(b, ["key", "kind", "has_value", "value"])
            rows = np.flatnonzero(np.isin(cols["kind"], poll) & cols["has_value"])
            rows = rows[member(cols["value"][rows], want)]
            out += zip(cols["key"][rows].tolist(), cols["value"][rows].tolist(), strict=True)
        return out

    def sends_among(self, values: list[int]) -> list[tuple[int, Elem]]:
        want = np.array(values, dtype=np.int64)
        out: list[tuple[int, Elem]] = []
        for b in range(len(self.spilled)):
            # Garbage reads are few and so are their values: a bucket is loaded whole only when
            # one of its values is among them (into the memory the check's buckets used).
            cols = self.spilled.columns(b, ["has_value", "value"])
            if member(cols["value"][cols["has_value"]], want).any():
                out += sends_among(self.spilled.load(b, reuse=True), values)
        return out

    def check(self, ctx: QueueContext) -> QueueResult:
        # Beside the elements' files, in the directory the caller removes.
        edges = EdgeSpill(Path(mkdtemp(prefix="edges-", dir=self.spilled.directory.parent)))
        findings, spans = [], []
        for b in range(len(self.spilled)):
            arrays = self.spilled.load(b, reuse=True)
            # Each piece's edges are written as soon as it is done, in key order.
            for found, ww, wr, back in checked_pieces(arrays, ctx, self.pool):
                findings += found
                spans.append(back)
                edges.add(ww, wr)
            del arrays
        all_spans = np.concatenate(spans, axis=1) if spans else np.zeros((2, 0), dtype=np.int64)
        return finish(findings, edges.finish(), ctx.subscribe, all_spans)
