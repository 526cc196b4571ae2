"""From findings to a verdict: valid, invalid or unknown, with the exit code and the files.

`decide` is the one place where the findings of every checker are combined into a verdict
(Jepsen's `merge-valid`); whether a finding is tolerated was settled before, by kind in
checkers/families/queue/policy.py (Jepsen's `allowed-error-types`; docs/checkers.md, "How the checks
compose").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.core.findings import Finding
from history import strict_json

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
EXIT_CODES = {VALID: 0, INVALID: 1, UNKNOWN: 2}
CRASHED_EXIT = 255
# harness/exit_codes.py BAD_INPUT_EXIT, the checkers' one copy (checkers/ cannot import harness/;
# tests/unit/harness/test_bad_input_cli.py holds the two equal): the command was misconfigured
# (no history or no runs where it was pointed), not a verdict about Kafka.
BAD_INPUT_EXIT = 254

RESULTS_NAME = "results.json"
SUMMARY_NAME = "summary.txt"


@dataclass
class Verdict:
    status: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    history: str = ""
    engine: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    # The liveness verdict, a result class of its own (checkers/families/liveness/check.py):
    # status live, hang or not judged, whether it fails the run, recovery times, bounds. None:
    # not checked (a history checked without its run directory's checkers).
    liveness: dict[str, Any] | None = None
    # The interesting states the run reached (checkers/families/coverage/, the table
    # checkers/core/states.py); None: not counted.
    coverage: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.tolerated is None and not f.unknown]

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, Counter[str]] = {}
        for f in self.findings:
            how = "tolerated" if f.tolerated else "unknown" if f.unknown else "failing"
            out.setdefault(f.kind, Counter())[how] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    def to_dict(self) -> dict[str, Any]:
        tolerated = {f.kind: f.tolerated for f in self.findings if f.tolerated}
        return {
            "status": self.status,
            "valid": {VALID: True, INVALID: False, UNKNOWN: None}[self.status],
            "exit_code": self.exit_code,
            "history": self.history,
            "engine": self.engine,
            "counts": self.counts(),
            "tolerated": dict(sorted(tolerated.items())),
            "notes": self.notes,
            "stats": self.stats,
            **({"liveness": self.liveness} if self.liveness is not None else {}),
            **({"coverage": self.coverage} if self.coverage is not None else {}),
            "findings": [f.to_dict() for f in self.findings],
        }

    def summary(self, per_kind: int = 3) -> str:
        lines = [f"{self.status.upper()}: {self.history}"]
        for kind, c in self.counts().items():
            parts = ", ".join(f"{n} {how}" for how, n in sorted(c.items()))
            lines.append(f"  {kind}: {parts}")
        for kind in sorted({f.kind for f in self.findings}):
            fs = [f for f in self.findings if f.kind == kind]
            failing = [f for f in fs if f.tolerated is None]
            for f in (failing or fs)[:per_kind]:
                lines.append(f"  - [{kind}] {f.explanation}")
            if fs[0].tolerated and not failing:
                lines.append(f"    tolerated: {fs[0].tolerated}")
        if self.liveness is not None:
            lines.append(liveness_line(self.liveness))
        if self.coverage is not None:
            lines.append(coverage_line(self.coverage))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def write(self, directory: str | Path) -> Path:
        d = Path(directory)
        path = d / RESULTS_NAME
        path.write_text(strict_json.dumps(self.to_dict(), indent=1) + "\n")
        (d / SUMMARY_NAME).write_text(self.summary())
        return path


def _seconds(recovered: dict[str, Any]) -> str:
    s = recovered.get("seconds")
    return "never" if s is None else f"{s:g} s"


def liveness_line(block: dict[str, Any]) -> str:
    """The liveness verdict in one line, for summary.txt and the console."""
    status = str(block.get("status", "not judged")).upper()
    counts = block.get("counts") or {}
    kinds = ", ".join(f"{k} {n}" for k, n in counts.items())
    how = "fails the run" if block.get("fails_run") else "reported (--liveness fail fails the run)"
    rec = (block.get("recovery") or {}).get("by_type") or {}
    took = ", ".join(f"{f} {_seconds(r)}" for f, r in rec.items() if isinstance(r, dict))
    return (
        f"LIVENESS: {status}"
        + (f" ({kinds}; {how})" if kinds else "")
        + (f"; recovery after the last heal the clients saw: {took}" if took else "")
    )


def coverage_line(block: dict[str, Any]) -> str:
    """The states the run reached, in one line, for summary.txt."""
    states = block.get("states") or {}
    reached = [f"{s} {n}" for s, n in states.items() if n]
    unmeasured = len(block.get("unmeasured") or {})
    return (
        f"COVERAGE: reached {len(reached)} of {len(states)} measured states"
        + (f": {', '.join(reached)}" if reached else "")
        + (f" ({unmeasured} not measured)" if unmeasured else "")
        + (
            f"; NOT EXERCISED, missing {', '.join(block['missing'])}"
            if block.get("missing")
            else ""
        )
    )


def decide(findings: list[Finding], checked_anything: bool) -> str:
    """The verdict over every checker's findings at once (Jepsen's merge-valid: invalid beats
    unknown beats valid): invalid if any finding is neither tolerated nor unknown; else unknown
    if no checker judged anything or any finding says it cannot tell; else valid. No checker
    takes a verdict of its own, and nothing is tolerated here: a finding arrives tolerated or
    not (queue/policy.py by kind, or the checker that holds the evidence)."""
    if any(f.tolerated is None and not f.unknown for f in findings):
        return INVALID
    if not checked_anything or any(f.unknown for f in findings):
        return UNKNOWN
    return VALID
