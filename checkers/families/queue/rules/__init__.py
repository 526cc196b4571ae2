"""The queue anomaly rules, one module per family. Each module holds, side by side, the kinds it
reports, its reference form (one key, plain Python over key_log.KeyLog: the yardstick), its
vectorised form (every key of a batch at once, numpy over logs.Logs: what the local and Spark
engines run), and the wording of its findings, which both forms share.

Every module of this package is a rule, run by every engine in name order (findings are sorted
afterwards): a new anomaly is a new module here, or a kind added to its family's module, with a
way to cause it in the test model (tests/unit/checkers/model.py INJECTIONS), which every
engine-agreement test then runs. A rule module provides (`Rule`):

    KINDS: tuple[str, ...]          every kind it reports, each spelled out whole
    reference(log, ctx)  -> list[Finding]
    vectorised(logs, ctx) -> list[Finding]

Dependency edges for the cycle search are not an anomaly: queue/dependencies.py makes them.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module
from typing import Protocol, cast

from checkers.core.findings import Finding
from checkers.families.queue.context import QueueContext
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs


class Rule(Protocol):
    KINDS: tuple[str, ...]

    def reference(self, log: KeyLog, ctx: QueueContext) -> list[Finding]:
        """The findings of one key."""
        ...

    def vectorised(self, logs: Logs, ctx: QueueContext) -> list[Finding]:
        """The findings of every key in `logs`: exactly what `reference` finds key by key."""
        ...


def _rule_modules() -> tuple[Rule, ...]:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__))
    return tuple(cast(Rule, import_module(f"{__name__}.{name}")) for name in names)


RULES: tuple[Rule, ...] = _rule_modules()
# Every queue anomaly kind, in rule order.
KINDS: tuple[str, ...] = tuple(kind for rule in RULES for kind in rule.KINDS)
