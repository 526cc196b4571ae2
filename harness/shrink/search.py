"""The search: a failing plan made smaller while it still fails, tried through a runner.

First the original is replayed ``tries`` times, all of them: its reproduction rate, which says
how far a "did not reproduce" can be trusted. Then delta debugging (Zeller's ddmin) over the
fault units, then greedy passes over the other moves (harness/shrink/candidates.py), again
until nothing smaller fails. A candidate is tried up to ``tries`` times and reproduces when one
try finds a failing finding of one of the chosen kinds; its first reproduction ends its tries.

The runner is injected: ``Runner(plan, folder) -> Attempt``. ``harness/shrink/replay.py`` runs
``kchaos run --replay`` on the plan.json the search wrote into ``folder``; the unit tests give a
seeded stand-in that decides failure from the plan alone. Everything is recorded as it happens
(``record``, shrink.json): each candidate, its runs and verdicts, the current smallest plan
(``plan.min.json``), so that Ctrl-C leaves a usable best-so-far and ``--resume`` repeats the
same search, taking each try already recorded instead of running it again.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.plan import Plan
from harness.shrink.candidates import (
    KEEP,
    PASS_MOVES,
    Candidate,
    ddmin_candidates,
    digest,
    fault_units,
    pass_candidates,
    size,
)
from history import strict_json

RECORD = "shrink.json"
MIN_PLAN = "plan.min.json"
ORIGINAL = "original"
RECORD_VERSION = 1
# How a shrink ended (shrink.json's status).
RUNNING, DONE, BUDGET, INTERRUPTED, NOT_REPRODUCED = (
    "running",
    "done",
    "out of budget",
    "interrupted",
    "not reproduced",
)


@dataclass
class Attempt:
    """One replay of a plan: its verdict and the kinds of its failing findings."""

    status: str  # valid, invalid, unknown, crashed, timeout, error
    kinds: list[str]
    run_dir: str | None = None
    seconds: float = 0.0
    summaries: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Runner = Callable[[Plan, Path | None], Attempt]


@dataclass(frozen=True)
class Budget:
    tries: int = 3
    max_runs: int | None = 60
    max_time: float | None = None  # seconds of the whole shrink, across --resume
    confirm: int = 0  # extra runs of the minimal plan, beyond max_runs and max_time


class OutOfBudget(Exception):
    """The next run would exceed --max-runs or --max-time."""


def new_record(run_dir: str, kinds: list[str], budget: Budget) -> dict[str, Any]:
    return {
        "kchaos_shrink": RECORD_VERSION,
        "run_dir": run_dir,
        "kinds": sorted(kinds),
        "tries": budget.tries,
        "max_runs": budget.max_runs,
        "max_time_s": budget.max_time,
        "confirm": budget.confirm,
        "started": _now(),
        "finished": None,
        "status": RUNNING,
        "why": None,
        "seconds": 0.0,
        "runs": 0,
        "best": ORIGINAL,
        "path": [ORIGINAL],
        "candidates": [],
        "confirmed": None,
        "suspects": {},
    }


def rate(runs: list[dict[str, Any]], kinds: set[str]) -> tuple[int, int]:
    """(runs that reproduced, runs)."""
    return sum(reproduces(r, kinds) for r in runs), len(runs)


def reproduces(run: dict[str, Any], kinds: set[str]) -> bool:
    return bool(kinds & set(run.get("kinds") or ()))


class Search:
    def __init__(
        self,
        original: Plan,
        runner: Runner,
        record: dict[str, Any],
        directory: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[dict[str, Any]], None] | None = None,
        presume: bool = True,
    ) -> None:
        self.original = original
        self.runner = runner
        self.record = record
        self.kinds = set(record["kinds"])
        self.budget = Budget(
            record["tries"], record["max_runs"], record["max_time_s"], record["confirm"]
        )
        self.directory = directory
        self.clock = clock
        self.on_change = on_change
        self._started = clock()
        self._before = float(record.get("seconds") or 0.0)
        # A resumed search meets the same candidates again: their recorded runs count.
        self.entries: dict[str, dict[str, Any]] = {c["digest"]: c for c in record["candidates"]}
        self.plans: dict[str, Plan] = {ORIGINAL: original}
        # Each fault step's score by its seed (harness/shrink/suspects.py), fixed when the
        # shrink began: a record without one (an earlier shrink's) orders as the plan does.
        self.scores: dict[str, int] = dict(record.get("suspects") or {})
        # The candidates tried and rejected, in order: what a smaller one is presumed to do.
        # (presume=False: every candidate is run, as before session 19; bench/bench_shrink.py
        # measures the difference.)
        self.rejected: list[tuple[str, Plan]] = []
        self.presume = presume
        self.current = original
        self._step = 1  # where on the recorded path the search is (after the original)
        self._original_entry()

    # The whole search ---------------------------------------------------------------------------
    def run(self) -> str:
        """Runs the search to its end, its budget or Ctrl-C (re-raised once recorded);
        returns the status it ended with."""
        self.record["status"], self.record["why"] = RUNNING, None
        try:
            try:
                if not self._baseline():
                    return self._end(NOT_REPRODUCED)
                self._search()
                self.record["status"] = DONE
            except OutOfBudget as exc:
                self.record["status"], self.record["why"] = BUDGET, str(exc)
            self._confirm()
            return self._end(self.record["status"])
        except KeyboardInterrupt:
            self._end(INTERRUPTED)
            raise

    def _end(self, status: str) -> str:
        self.record["status"] = status
        if status != INTERRUPTED:
            self.record["finished"] = _now()
        self._save()
        return status

    def _baseline(self) -> bool:
        """The original's reproduction rate: every one of its tries."""
        entry = self.record["original"]
        self._tries(self.original, entry, ORIGINAL, early=False, n=self.budget.tries)
        return any(reproduces(r, self.kinds) for r in entry["runs"])

    def _search(self) -> None:
        changed = True
        while changed:
            changed = self._ddmin()
            for move in PASS_MOVES:
                while self._first(pass_candidates(self.current, move)) is not None:
                    changed = True

    def _ddmin(self) -> bool:
        """Zeller's ddmin over the fault units: keep a chunk alone (then granularity 2), drop a
        chunk (then one chunk fewer), else split finer; ends 1-minimal: dropping any single
        unit no longer reproduces within the tries."""
        n, changed = 2, False
        while units := len(fault_units(self.current.faults)):
            n = min(n, units)
            found = self._first(ddmin_candidates(self.current, n, self.scores))
            if found is not None:
                changed = True
                n = 2 if found.move == KEEP else max(n - 1, 2)
            elif n >= units:
                break
            else:
                n = min(2 * n, units)
        return changed

    def _first(self, candidates: list[Candidate]) -> Candidate | None:
        """The first candidate that reproduces, made the current plan. A candidate no bigger
        than one already rejected (``dominated``) is presumed not to, and is not run."""
        for c in candidates:
            entry = self._entry(c)
            if self.presume and entry.get("presumed") is None and not entry["runs"]:
                entry["presumed"] = next(
                    (rid for rid, r in self.rejected if dominated(c.plan, r)), None
                )
            if entry.get("presumed") is not None:
                entry["reproduced"] = False
                self._save()
                continue
            if self._tries(c.plan, entry, entry["id"], early=True, n=self.budget.tries):
                self.current = c.plan
                self._accept(entry["id"])
                return c
            self.rejected.append((entry["id"], c.plan))
        return None

    def _accept(self, cid: str) -> None:
        """The path grows by ``cid``; a resumed search walks its recorded path again first,
        keeping its best (and plan.min.json) until it passes it or leaves it."""
        path = self.record["path"]
        if not (self._step < len(path) and path[self._step] == cid):
            del path[self._step :]
            path.append(cid)
        self._step += 1
        self.record["best"] = path[-1]
        self._save()

    def _confirm(self) -> None:
        """The minimal plan's rate over --confirm extra runs (beyond the search's budget)."""
        if not self.budget.confirm or self.record["status"] == NOT_REPRODUCED:
            return
        best = self.record["best"]
        confirmed = self.record.get("confirmed")
        if not confirmed or confirmed.get("of") != best:
            confirmed = self.record["confirmed"] = {"of": best, "runs": []}
        plan = self.plans.get(best, self.current)
        while len(confirmed["runs"]) < self.budget.confirm:
            self._one(plan, self._folder(best), confirmed["runs"])

    # Tries ----------------------------------------------------------------------------------
    def _tries(self, plan: Plan, entry: dict[str, Any], label: str, early: bool, n: int) -> bool:
        runs = entry["runs"]
        while len(runs) < n and not (early and any(reproduces(r, self.kinds) for r in runs)):
            self._spend()
            self._one(plan, self._folder(label), runs)
        entry["reproduced"] = any(reproduces(r, self.kinds) for r in runs)
        self._save()
        return bool(entry["reproduced"])

    def _one(self, plan: Plan, folder: Path | None, runs: list[dict[str, Any]]) -> None:
        attempt = self.runner(plan, folder)
        runs.append(attempt.to_dict())
        self.record["runs"] += 1
        self._save()

    def _spend(self) -> None:
        b = self.budget
        if b.max_runs is not None and self.record["runs"] >= b.max_runs:
            raise OutOfBudget(f"--max-runs {b.max_runs} spent")
        if b.max_time is not None and self._elapsed() >= b.max_time:
            raise OutOfBudget(f"--max-time {b.max_time:g} s spent")

    def _elapsed(self) -> float:
        return self._before + self.clock() - self._started

    # Records --------------------------------------------------------------------------------
    def _original_entry(self) -> None:
        if "original" not in self.record:
            self.record["original"] = {
                "id": ORIGINAL,
                "digest": digest(self.original),
                "size": size(self.original).to_dict(),
                "runs": [],
                "reproduced": None,
            }
        self._write_plan(ORIGINAL, self.original)
        # A resumed search starts from its best so far only through the same candidates.
        for c in self.record["candidates"]:
            c.setdefault("reproduced", None)

    def _entry(self, c: Candidate) -> dict[str, Any]:
        d = digest(c.plan)
        entry = self.entries.get(d)
        if entry is None:
            entry = {
                "id": f"c{len(self.record['candidates']) + 1:04d}",
                "digest": d,
                "parent": self.record["best"],
                "move": c.move,
                "what": c.what,
                "size": size(c.plan).to_dict(),
                "runs": [],
                "reproduced": None,
                "presumed": None,
            }
            self.record["candidates"].append(entry)
            self.entries[d] = entry
        self.plans[entry["id"]] = c.plan
        self._write_plan(entry["id"], c.plan)
        return entry

    def _folder(self, label: str) -> Path | None:
        return None if self.directory is None else self.directory / label

    def _write_plan(self, label: str, plan: Plan) -> None:
        folder = self._folder(label)
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            _atomic(folder / "plan.json", plan.to_json())

    def _save(self) -> None:
        self.record["seconds"] = round(self._elapsed(), 1)
        if self.directory is not None:
            best = self.plans.get(self.record["best"])
            if best is not None:  # a resumed search meets its best again on the way to it
                _atomic(self.directory / MIN_PLAN, best.to_json())
            _atomic(self.directory / RECORD, strict_json.dumps(self.record, indent=1) + "\n")
        if self.on_change is not None:
            self.on_change(self.record)


# The spec options a shrink lowers; any other difference makes two plans incomparable.
_LOWERED = ("time_limit", "concurrency", "rate")


def _multiset(items: list[Any]) -> Counter[str]:
    return Counter(strict_json.dumps(i, sort_keys=True) for i in items)


def dominated(plan: Plan, rejected: Plan) -> bool:
    """Whether ``plan`` does no more than ``rejected`` did: each of its fault steps and family
    steps is one of ``rejected``'s, the same spec but for a time limit, concurrency and rate
    no higher. The search presumes such a plan fails no more often than the rejected one, so
    it does not run it: without this, the plan with no faults would be tried again (at
    ``tries`` runs) after every pass that changed the spec, and so would each unit ddmin had
    already found it needs."""
    a, b = plan.to_dict(), rejected.to_dict()
    if a["seed"] != b["seed"] or set(a) - set(b):
        return False
    for key in a.keys() - {"kchaos_plan", "seed", "spec", "generator"}:
        if _multiset(a[key]) - _multiset(b[key]):
            return False
    spec = {k: v for k, v in plan.spec.items() if k not in _LOWERED}
    if spec != {k: v for k, v in rejected.spec.items() if k not in _LOWERED}:
        return False
    mine, theirs = size(plan), size(rejected)
    return (
        mine.time_limit <= theirs.time_limit
        and mine.concurrency <= theirs.concurrency
        and mine.rate <= theirs.rate
    )


def read_record(directory: Path) -> dict[str, Any]:
    """An earlier shrink's record, to resume; ValueError says in one sentence what it is not."""
    try:
        record = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{directory}: no readable {RECORD} ({exc})") from None
    if not isinstance(record, dict) or record.get("kchaos_shrink") != RECORD_VERSION:
        raise ValueError(f"{directory}: {RECORD} is not a shrink record of version 1")
    return record


def _atomic(path: Path, text: str) -> None:
    """Whole or not at all: Ctrl-C never leaves half a plan.min.json."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
