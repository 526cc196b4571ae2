"""Finding the runs under a directory and what each says about itself (small JSON files)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkers.analyze.scenario import ScenarioTerms, nemesis_items, scenario
from checkers.core.verdict import RESULTS_NAME
from history.effects import started
from history.format import PARQUET_NAME

# harness/run/rundir.py names run directories <UTC stamp>-<seed>[-n]; campaigns name a night's
# directory by its stamp alone.
_STAMP = re.compile(r"^(\d{8}T\d{6})(?:-|$)")
CAMPAIGN_NAME = "campaign.json"
# harness/exit_codes.py CRASHED_RUN_EXIT: the client host died or hung (checkers/ cannot import
# harness/).
CRASHED_EXIT = 253
HISTORY_NAMES = (PARQUET_NAME, "history.jsonl")
# The verdicts a run can have in the analysis; only "valid" passes.
VERDICTS = ("valid", "invalid", "unknown", "crashed", "not checked")


@dataclass
class RunInfo:
    path: Path
    workload: str
    nemesis: str  # what ran: "+"-joined fault names, "none" without faults
    version: str  # the Kafka release that ran (run.json kafka_version), "" when unknown
    started: datetime | None
    status: str  # one of VERDICTS
    failing: dict[str, int] = field(default_factory=dict)  # kind -> failing findings
    has_report: bool = False
    requested_version: str = ""
    requested_nemesis: str = "none"
    scenario: str = ""
    night: datetime | None = None
    campaign: str = ""  # the campaign's name (results/<campaign>/<night>/); "" for none
    crashed: str = ""  # how the client host ended, "" when it did not crash
    checked: str = ""  # results.json status as the checker wrote it
    liveness: str = ""  # results.json liveness status (docs/checkers.md, Liveness); "" if none
    coverage: dict[str, int] = field(default_factory=dict)  # state -> times (results.json)

    @property
    def n_failing(self) -> int:
        return sum(self.failing.values())


def _json(p: Path) -> dict[str, Any]:
    try:
        obj = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _stamp(text: str) -> datetime | None:
    m = _STAMP.match(text)
    if m:
        return datetime.strptime(m[1], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    return None


def _iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return _stamp(value)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _started(run: Path, info: dict[str, Any]) -> datetime | None:
    return _stamp(run.name) or _iso(info.get("started"))


def _night(campaign_dir: Path) -> datetime | None:
    """A campaign night's timestamp: its directory's name, else what campaign.json says."""
    stamp = _stamp(campaign_dir.name)
    if stamp:
        return stamp
    doc = _json(campaign_dir / CAMPAIGN_NAME)
    for key in ("timestamp", "started", "start"):
        t = _iso(doc.get(key))
        if t:
            return t
    return datetime.fromtimestamp((campaign_dir / CAMPAIGN_NAME).stat().st_mtime, UTC)


def is_run_dir(d: Path) -> bool:
    """A run directory holds run.json, or spec.json and a history (a run copied by hand)."""
    if (d / "run.json").is_file():
        return True
    return (d / "spec.json").is_file() and any((d / h).is_file() for h in HISTORY_NAMES)


def nemesis_ran(run: Path, spec: dict[str, Any]) -> str:
    """The faults that ran: nemesis.json's timeline (starts that succeeded), else plan.json's
    fault steps (planned; the run did not record its timeline), else the request."""
    timeline = _json(run / "nemesis.json").get("timeline")
    if isinstance(timeline, list):
        # The same starts the checks' fault spans begin at (history/effects.py `started`).
        names = {
            started(str(e.get("f", "")))
            for e in timeline
            if isinstance(e, dict) and e.get("type") == "ok"
        } - {None}
        return "+".join(sorted(names)) or "none"
    faults = _json(run / "plan.json").get("faults")
    if isinstance(faults, list):
        names = {str(f.get("fault")) for f in faults if isinstance(f, dict) and f.get("fault")}
        return "+".join(sorted(names)) or "none"
    return "+".join(nemesis_items(spec)) or "none"


def _status(info: dict[str, Any], results: dict[str, Any]) -> tuple[str, str, str]:
    """(verdict, crashed, checked). A crashed run's findings still stand (invalid stays
    invalid); otherwise it is "crashed", never the valid its partial history may check as."""
    checked = str(results.get("status") or "not checked")
    crash = info.get("crashed")
    crashed = ""
    if isinstance(crash, dict):
        where = crash.get("where", "?")
        how = crash.get("signal") or ("hang" if "hang" in crash else f"exit {crash.get('exit')}")
        crashed = f"{how} during {where}"
    elif crash or info.get("exit_code") == CRASHED_EXIT:
        crashed = "crashed"
    if checked == "invalid":
        return "invalid", crashed, checked
    if crashed:
        return "crashed", crashed, checked
    if checked not in VERDICTS:
        return "not checked", crashed, checked
    return checked, crashed, checked


def run_info(run: Path, campaign_dir: Path | None, terms: ScenarioTerms) -> RunInfo:
    spec, info, results = (
        _json(run / "spec.json"),
        _json(run / "run.json"),
        _json(run / RESULTS_NAME),
    )
    status, crashed, checked = _status(info, results)
    counts = results.get("counts") or {}
    started = _started(run, info)
    return RunInfo(
        path=run,
        workload=str(spec.get("workload", "?")),
        nemesis=nemesis_ran(run, spec),
        version=str(info.get("kafka_version") or ""),
        started=started,
        status=status,
        failing={k: c["failing"] for k, c in counts.items() if c.get("failing")},
        has_report=(run / "report.html").exists(),
        requested_version=str(spec.get("version", "")),
        requested_nemesis="+".join(nemesis_items(spec)) or "none",
        scenario=scenario(spec, terms) if spec else f"? ({run.name}: no spec.json)",
        night=_night(campaign_dir) if campaign_dir else started,
        campaign=campaign_dir.parent.name if campaign_dir else "",
        crashed=crashed,
        checked=checked,
        liveness=str((results.get("liveness") or {}).get("status") or ""),
        coverage={
            str(k): int(v)
            for k, v in ((results.get("coverage") or {}).get("states") or {}).items()
            if isinstance(v, int)
        },
    )


def find_runs(root: str | Path, terms: ScenarioTerms) -> list[RunInfo]:
    """Every run directory under `root` (campaign nights, plain runs or both), sorted by path.
    Symlinks are not followed: results/latest points at a run already found under its name."""
    root = Path(root)
    out = []
    for here, dirs, _files in os.walk(root):
        d = Path(here)
        dirs.sort()
        if is_run_dir(d):
            dirs.clear()  # a run's data/, logs/ hold no runs
            campaign = next((p for p in [d, *d.parents] if (p / CAMPAIGN_NAME).is_file()), None)
            out.append(run_info(d, campaign, terms))
    return sorted(out, key=lambda r: str(r.path))
