"""Finding the runs under a directory and what each says about itself (small JSON files)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkers.verdict import RESULTS_NAME
from history.format import PARQUET_NAME

# harness/rundir.py names run directories <UTC stamp>-<seed>[-n].
_STAMP = re.compile(r"^(\d{8}T\d{6})-")


@dataclass
class RunInfo:
    path: Path
    workload: str
    nemesis: str  # "+"-joined, "none" without faults
    version: str
    started: datetime | None
    status: str  # valid / invalid / unknown / not checked
    failing: dict[str, int] = field(default_factory=dict)  # kind -> failing findings
    has_report: bool = False

    @property
    def n_failing(self) -> int:
        return sum(self.failing.values())


def _json(p: Path) -> dict[str, Any]:
    try:
        obj = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _started(run: Path) -> datetime | None:
    m = _STAMP.match(run.name)
    if m:
        return datetime.strptime(m[1], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    return None


def find_runs(root: str | Path) -> list[RunInfo]:
    """Every directory under `root` holding a history.parquet, sorted by path."""
    out = []
    for parquet in sorted(Path(root).rglob(PARQUET_NAME)):
        run = parquet.parent
        if run.is_symlink() or any(p.is_symlink() for p in run.parents if p != Path(root)):
            continue  # results/latest points at a run already found under its own name
        spec, results = _json(run / "spec.json"), _json(run / RESULTS_NAME)
        nemesis = spec.get("nemesis") or []
        nemesis = nemesis if isinstance(nemesis, list) else [str(nemesis)]
        counts = results.get("counts") or {}
        out.append(
            RunInfo(
                path=run,
                workload=str(spec.get("workload", "?")),
                nemesis="+".join(sorted(map(str, nemesis))) or "none",
                version=str(spec.get("version", "?")),
                started=_started(run),
                status=str(results.get("status", "not checked")),
                failing={k: c["failing"] for k, c in counts.items() if c.get("failing")},
                has_report=(run / "report.html").exists(),
            )
        )
    return out
