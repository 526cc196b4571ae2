"""What a queue engine is, and how any engine runs: the history's cross-key facts gathered once
into a QueueContext (context.queue_context, from the engine's answers), then the engine's check
of every key under that context. The engines: per_key.ReferenceEngine, vector.LocalEngine,
spark.SparkEngine; dispatch.py chooses one by name."""

from __future__ import annotations

from typing import Protocol

from checkers.families.queue.context import ElementFacts, QueueContext, Resets, queue_context
from checkers.families.queue.result import QueueResult
from checkers.families.queue.rules.reads import attribute_elsewhere
from history.format import JEPSEN, UNDECLARED


class QueueEngine(ElementFacts, Protocol):
    """Made from a source.ElementSource; answers ElementFacts (info_sends, polled_among) about
    its elements, then checks them."""

    def check(self, ctx: QueueContext) -> QueueResult:
        """Every rule (rules/) on every key, and the dependency edges (dependencies.py)."""
        ...


def run(
    engine: QueueEngine,
    resets: Resets,
    slots: int | None = None,
    after_abort: str = UNDECLARED,
    producers: bool = False,
) -> QueueResult:
    """`resets`: check.queue_resets; `slots`, `after_abort`, `producers`: QueueContext's.
    Garbage reads of a value sent to another key become `read-from-other-partition` here,
    after every key was checked (rules/reads.attribute_elsewhere), where values name one send
    in the whole run: every history but Jepsen's."""
    result = engine.check(queue_context(engine, resets, slots, after_abort, producers))
    if after_abort != JEPSEN:
        result.findings = attribute_elsewhere(result.findings, engine)
    return result
