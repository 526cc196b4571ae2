"""What a checker is, and how `kchaos check` composes them: Jepsen's `Checker` and `compose`.

Jepsen composes checkers as a map of names to checkers, each `(check test history opts)`
returning a map with `:valid?`, merged by `merge-valid` (jepsen.checker). Here a checker is an
object with a `name`, the `needs` it declares, and `check(inputs) -> CheckerResult`; the
registry (checkers/registry.py) is an ordered list of them; `run_checkers` runs them in that
order over one `RunInputs`; `compose` puts their results together. Unlike Jepsen's, a result is
not a verdict: it holds findings, and the verdict is taken once, over all of them, by
`checkers.core.verdict.decide` (merge-valid) after the writer's tolerances
(queue/policy.for_writer), so that a finding's kind, not the checker that found it, says whether it
is tolerated.

Order matters only where a checker reads an earlier one's result (`Needs.after`): the cycle
search reads the queue checker's edges, the metadata-log checker the queue findings that
corroborate a fenced broker's send. `run_checkers` refuses a registry that lists a checker
before one it reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from checkers.core.checker_result import CheckerResult
from checkers.core.findings import Finding
from checkers.core.inputs import Needs, RunInputs
from checkers.families.queue.policy import for_writer
from history.names import Names

NOTHING_CHECKED = "no queue elements, admin ops or observer samples: nothing to check"


class Checker(Protocol):
    """One family of checks; `name` is its key in results (and in kinds.py)."""

    name: str

    def needs(self, inputs: RunInputs) -> Needs:
        """Asked before anything is read: `inputs` answers only where the run is
        (`run_dir`, `has_dir`), what the history's metadata says (`header`, `has_op_fields`)
        and how it is checked (`engine`); plan.json (`generator`) for a checker that reads it
        anyway."""
        ...

    def check(self, inputs: RunInputs) -> CheckerResult: ...


def run_checkers(checkers: Sequence[Checker], inputs: RunInputs) -> dict[str, CheckerResult]:
    """Every checker's result by name, run in the order given, each reading only its needs."""
    needs = {c.name: c.needs(inputs) for c in checkers}
    _check_order(checkers, needs)
    inputs.plan(needs.values())
    results: dict[str, CheckerResult] = {}
    for c in checkers:
        with inputs.serving(c.name, needs[c.name]):
            results[c.name] = c.check(inputs)
        inputs.results[c.name] = results[c.name]
        _check_replaced(c.name, results, needs[c.name])
    return results


def _check_replaced(name: str, results: dict[str, CheckerResult], needs: Needs) -> None:
    """A checker replaces only findings of checkers it read (Needs.after), each as it was."""
    earlier = Counter(f for n in needs.after for f in results[n].findings)
    stray = Counter(results[name].replaces) - earlier
    if stray:
        raise RuntimeError(
            f"checker {name!r} replaces findings no checker it reads reported: "
            f"{sorted({f.kind for f in stray})}"
        )


def _check_order(checkers: Sequence[Checker], needs: dict[str, Needs]) -> None:
    seen: set[str] = set()
    for c in checkers:
        late = [n for n in needs[c.name].after if n not in seen]
        if late:
            raise ValueError(f"checker {c.name!r} reads {late} but runs before them")
        seen.add(c.name)


@dataclass
class Composed:
    """Every checker's say, put together for the verdict (checkers.core.verdict.decide)."""

    findings: list[Finding]
    notes: list[str]
    stats: dict[str, Any]
    checked: bool


def compose(results: dict[str, CheckerResult], after_abort: str, names: Names | None) -> Composed:
    """Findings, notes and stats in registry order, less the findings a later checker replaced
    (`CheckerResult.replaces`). The history writer's tolerances are applied
    to every finding at once (queue/policy.for_writer: Jepsen's verdicts for Jepsen's histories),
    and a Jepsen history's findings are said back in its own names (history/names.py)."""
    replaced = Counter(f for r in results.values() for f in r.replaces)
    findings = []
    for f in (f for r in results.values() for f in r.findings):
        if replaced[f]:
            replaced[f] -= 1  # its replacement, with the evidence it lacked, is reported instead
            continue
        findings.append(f)
    findings = for_writer(findings, after_abort)
    if names:
        # Jepsen's keywords and strings were numbered for the columnar form: said back in them.
        findings = [replace(f, explanation=names.rename(f.explanation)) for f in findings]
    notes = [n for r in results.values() for n in r.notes]
    checked = any(r.checked for r in results.values())
    if not checked:
        notes.append(NOTHING_CHECKED)
    stats = {k: v for r in results.values() for k, v in r.stats.items()}
    return Composed(findings, notes, stats, checked)
