"""What one checker says of a run (checkers/core/checker.py runs them; checkers/core/inputs.py hands
a checker's result to the later checkers that read it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import Finding


@dataclass
class CheckerResult:
    """One checker's say. `checked`: whether it judged anything (a run nobody judged is unknown);
    `stats` go to results.json `stats`; `outputs` are for later checkers only (Needs.after) and
    never written; `replaces`: earlier findings its own findings stand for."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: bool = False
    stats: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    # Findings of earlier checkers (ones its Needs.after names) that this one's findings stand
    # for, with the evidence those lacked: `compose` reports these no more. The durability
    # checks judge the queue's lost writes against what Kafka promises after a power loss.
    replaces: list[Finding] = field(default_factory=list)
