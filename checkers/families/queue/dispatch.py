"""The queue engines by name: the one place an engine is chosen.

- `reference`: per_key.ReferenceEngine, every rule's reference form key by key in Python (slow;
  the yardstick the others are tested against).
- `local`: vector.LocalEngine, every rule's vectorised form over batches of keys, numpy in this
  process; over a history too big to hold (ElementSource.spilled), streamed.StreamedEngine,
  the same forms one spilled bucket of keys at a time.
- `spark`: spark.SparkEngine, the vectorised forms per hash bucket of the key on Spark.

The check's own choices (`auto`: Spark when a master is named, else local; `pandas`: the local
engine's old name) resolve to these names through `engine_name`.
"""

from __future__ import annotations

from collections.abc import Callable

from checkers.families.queue.context import Resets
from checkers.families.queue.engine import QueueEngine, run
from checkers.families.queue.per_key import ReferenceEngine
from checkers.families.queue.result import QueueResult
from checkers.families.queue.source import ElementSource
from checkers.families.queue.spark import SparkEngine
from checkers.families.queue.streamed import StreamedEngine
from checkers.families.queue.vector import LocalEngine
from history.format import UNDECLARED


def local_engine(source: ElementSource) -> QueueEngine:
    """The local engine over the form of the elements given: spilled, or held."""
    return StreamedEngine(source) if source.spilled is not None else LocalEngine(source)


ENGINES: dict[str, Callable[[ElementSource], QueueEngine]] = {
    "local": local_engine,
    "spark": SparkEngine,
    "reference": ReferenceEngine,
}
ENGINE_NAMES = tuple(ENGINES)
# What `kchaos check --engine` accepts: the engines, and the names engine_name resolves.
AUTO, OLD_LOCAL = "auto", "pandas"
ENGINE_CHOICES = (AUTO, "local", OLD_LOCAL, "spark", "reference")


def engine_name(choice: str, spark_master: str | None = None) -> str:
    """The engine a `--engine` choice names: `auto` is Spark when a master is named (on one
    machine the local engine beats local[*] Spark at every size: docs/checkers.md), else
    local."""
    if choice == AUTO:
        return "spark" if spark_master is not None else "local"
    if choice == OLD_LOCAL:
        return "local"
    if choice not in ENGINES:
        raise ValueError(f"engine {choice!r}: expected one of {', '.join(ENGINE_CHOICES)}")
    return choice


def run_engine(
    name: str,
    source: ElementSource,
    resets: Resets,
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> QueueResult:
    """All queue anomalies and dependency edges of the elements in `source`, by engine `name`
    (ENGINE_NAMES). `resets`: check.queue_resets; `slots`: worker slots sharing transactional
    ids (QueueContext.slots), None: fenced-producer-read not judged; `after_abort`: the
    history's poll rule after aborts (history.format.after_abort_rule). The producer-order rule
    is judged when `source.producers` says the history's producers promise it."""
    if name not in ENGINES:
        raise ValueError(f"queue engine {name!r}: expected one of {', '.join(ENGINE_NAMES)}")
    return run(ENGINES[name](source), resets, slots, after_abort, source.producers)
