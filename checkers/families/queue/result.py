"""What every engine returns: the findings, with the tolerance policy applied and in one order,
and the dependency edges the cycle search takes next."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from checkers.core.findings import Finding
from checkers.families.edges import EdgeArrays
from checkers.families.queue.policy import apply_policy


@dataclass
class QueueResult:
    findings: list[Finding] = field(default_factory=list)
    # The edges in parts, in order (one per batch of keys): the cycle search reads them part
    # by part, and a copy of millions of edges into one set of arrays is made only if asked.
    # A streamed check's are on disk (edges.SpilledEdges), read a part at a time.
    edge_parts: Sequence[EdgeArrays] = field(default_factory=list)
    subscribe: bool = False
    # [lo, hi] invocation-time spans of the edges that go back in time, when the checks made
    # them (cycles.find_cycles); None: the cycle search finds them itself.
    back_spans: np.ndarray | None = None

    @property
    def edges(self) -> EdgeArrays:
        if len(self.edge_parts) != 1:
            self.edge_parts = [EdgeArrays.concat(self.edge_parts)]
        return self.edge_parts[0]


def finish(
    findings: list[Finding],
    edges: EdgeArrays | Sequence[EdgeArrays],
    subscribe: bool,
    back_spans: np.ndarray | None = None,
) -> QueueResult:
    """The result of a check: findings sorted (Finding.sort_key), whatever order the rules and
    keys produced them in, so that every engine's result is the same list."""
    findings = sorted(apply_policy(findings, subscribe), key=Finding.sort_key)
    parts = [edges] if isinstance(edges, EdgeArrays) else edges
    return QueueResult(findings, parts, subscribe, back_spans)
