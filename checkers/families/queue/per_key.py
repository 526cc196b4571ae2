"""The reference engine: every rule's reference form (rules/), one key at a time, in plain Python
over an Arrow table of elements. Slow; the yardstick the local and Spark engines are held to
(tests/unit/checkers/test_queue_vector.py, test_queue_spark.py).

Semantics follow Jepsen's Kafka checker (jepsen.tests.kafka), with its anomaly names; the
version order every rule reads is key_log.KeyLog.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from checkers.core.findings import Finding
from checkers.families.edges import Edge, EdgeArrays
from checkers.families.queue import dependencies
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import Elem, elems_from_columns
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.result import QueueResult, finish
from checkers.families.queue.rules import RULES
from checkers.families.queue.source import ElementSource

__all__ = ["KeyResult", "ReferenceEngine", "check_key"]


@dataclass
class KeyResult:
    findings: list[Finding] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)


def check_key(key: int, elems: list[Elem], ctx: QueueContext) -> KeyResult:
    """Every queue anomaly of `key` (its elements in op and read order), and its edges."""
    log = KeyLog(key, elems, ctx)
    findings = [f for rule in RULES for f in rule.reference(log, ctx)]
    return KeyResult(findings, dependencies.reference(log))


class ReferenceEngine:
    """engine.QueueEngine over element rows as Python lists."""

    def __init__(self, source: ElementSource) -> None:
        self.cols = source.element_table().to_pydict()

    def info_sends(self) -> list[tuple[int, int, int]]:
        kind, typ, index, key, value = (
            self.cols["kind"], self.cols["type"], self.cols["index"], self.cols["key"],
            self.cols["value"],
        )  # fmt: skip
        return [
            (index[i], key[i], value[i])
            for i in range(len(kind))
            if kind[i] == "send" and typ[i] == "info" and value[i] is not None
        ]

    def polled_among(self, values: list[int]) -> Iterable[tuple[int, int]]:
        kind, key, value = self.cols["kind"], self.cols["key"], self.cols["value"]
        wanted = set(values)
        return [
            (key[i], value[i]) for i in range(len(kind)) if kind[i] == "poll" and value[i] in wanted
        ]

    def sends_among(self, values: list[int]) -> list[tuple[int, Elem]]:
        kind, key, value = self.cols["kind"], self.cols["key"], self.cols["value"]
        wanted = set(values)
        rows = [i for i in range(len(kind)) if kind[i] == "send" and value[i] in wanted]
        elems = elems_from_columns(self.cols, rows)
        keys = {(int(self.cols["index"][i]), int(self.cols["seq"][i])): key[i] for i in rows}
        return [(int(keys[e.index, e.seq]), e) for e in elems]

    def check(self, ctx: QueueContext) -> QueueResult:
        rows: dict[int, list[int]] = defaultdict(list)
        for i, k in enumerate(self.cols["key"]):
            rows[k].append(i)
        results = [check_key(k, elems_from_columns(self.cols, rows[k]), ctx) for k in sorted(rows)]
        findings = [f for r in results for f in r.findings]
        edges = EdgeArrays.from_edges(e for r in results for e in r.edges)
        return finish(findings, edges, ctx.subscribe)
