"""The shrink's search (harness/shrink/search.py) against a stand-in oracle: a pure function that
decides from a plan, with a seeded probability, whether a replay of it fails. This tests the
search's logic (ddmin, the passes, tries, budgets, the record, resume, Ctrl-C), not Kafka: the
real runs go through harness/shrink/replay.py, `kchaos run --replay`."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest

from harness.plan import Plan, build_plan, load_plan
from harness.shrink.candidates import digest, fault_units, size
from harness.shrink.search import (
    BUDGET,
    DONE,
    INTERRUPTED,
    MIN_PLAN,
    NOT_REPRODUCED,
    Attempt,
    Budget,
    Search,
    new_record,
    read_record,
)
from harness.spec import RunSpec, validate

KIND = "lost-write"


def _plan() -> Plan:
    """Ten fault units of five packages over 100 s, four clients at 50/s."""
    spec = RunSpec.of(
        nemesis=["partition", "kill", "pause", "clock", "packet"],
        time_limit=100.0,
        nemesis_interval=5.0,
    )
    return build_plan(validate(spec), 7)


def _needs_kill(plan: Plan) -> bool:
    return any(s.fault == "kill" and s.action == "start" for s in plan.faults)


class Oracle:
    """A replay decided from the plan: it fails (``KIND``) with probability ``p`` when
    ``cause(plan)``, never otherwise; each plan's n-th try has its own seeded draw, so the same
    tries give the same verdicts in any order of runs."""

    def __init__(self, cause: Callable[[Plan], bool] = _needs_kill, p: float = 1.0) -> None:
        self.cause, self.p = cause, p
        self.calls: list[str] = []
        self.interrupt_at: int | None = None

    def __call__(self, plan: Plan, folder: Path | None) -> Attempt:
        if self.interrupt_at is not None and len(self.calls) + 1 == self.interrupt_at:
            raise KeyboardInterrupt
        d = digest(plan)
        n = sum(c == d for c in self.calls)
        self.calls.append(d)
        fails = self.cause(plan) and random.Random(f"{d}/{n}").random() < self.p
        return Attempt("invalid" if fails else "valid", [KIND] if fails else [], None, 1.0)


def _search(oracle: Oracle, budget: Budget | None = None, tmp: Path | None = None) -> Search:
    record = new_record("results/x/run", [KIND], budget or Budget())
    return Search(_plan(), oracle, record, directory=tmp)


def _path_plans(search: Search) -> list[Plan]:
    return [search.plans[i] for i in search.record["path"]]


def test_a_certain_failure_shrinks_to_one_narrow_kill_on_one_slow_client(tmp_path):
    oracle = Oracle()
    s = _search(oracle, tmp=tmp_path)
    assert s.run() == DONE
    best = load_plan(tmp_path / MIN_PLAN)
    assert best.to_json() == s.current.to_json()
    units = fault_units(best.faults)
    assert len(units) == 1
    step = best.faults[units[0][0]]
    assert (step.fault, step.kind) == ("kill", "one")
    assert best.spec["concurrency"] == 1 and best.spec["rate"] == 1.0
    assert best.spec["time_limit"] < 100.0
    # Monotone: every accepted plan strictly smaller than the one before.
    sizes = [size(p) for p in _path_plans(s)]
    assert all(b < a for a, b in pairwise(sizes))
    # Every run is recorded: the original's three, then each candidate's.
    rec = json.loads((tmp_path / "shrink.json").read_text())
    assert rec["runs"] == len(oracle.calls) == 3 + sum(len(c["runs"]) for c in rec["candidates"])
    ran = [c for c in rec["candidates"] if not c["presumed"]]
    assert all(1 <= len(c["runs"]) <= 3 for c in ran)
    assert all(c["reproduced"] == bool(c["runs"][-1]["kinds"]) for c in ran)
    # The others are no bigger than one rejected: presumed not to reproduce, not run.
    assert all(
        c["runs"] == [] and c["reproduced"] is False for c in rec["candidates"] if c["presumed"]
    )


@pytest.mark.parametrize("seed", range(4))
def test_a_flaky_failure_keeps_its_cause_and_never_grows(seed):
    oracle = Oracle(lambda p: _needs_kill(p) and p.spec["concurrency"] >= 2, p=0.5)
    oracle.calls.append(f"seed {seed}")  # another stream of draws for each case
    s = _search(oracle, Budget(tries=3, max_runs=200))
    s.run()
    assert _needs_kill(s.current) and s.current.spec["concurrency"] >= 2
    sizes = [size(p) for p in _path_plans(s)]
    assert all(b < a for a, b in pairwise(sizes))
    for c in (c for c in s.record["candidates"] if not c["presumed"]):
        # A candidate that reproduced stopped at its first reproduction; one that did not ran
        # every try, unless the budget ended it.
        hits = [bool(r["kinds"]) for r in c["runs"]]
        assert hits.count(True) <= 1 and (hits[-1] or len(hits) == 3 or s.record["status"] != DONE)


def test_a_plan_that_never_fails_again_is_not_shrunk():
    oracle = Oracle(lambda p: False)
    s = _search(oracle, Budget(tries=4))
    assert s.run() == NOT_REPRODUCED
    assert len(oracle.calls) == 4 and s.record["candidates"] == []


def test_the_original_is_measured_with_every_try_even_after_a_failure():
    oracle = Oracle(p=1.0)
    s = _search(oracle, Budget(tries=5, max_runs=5))
    assert s.run() == BUDGET
    assert len(s.record["original"]["runs"]) == 5 and s.record["runs"] == 5
    assert s.record["why"] == "--max-runs 5 spent"


def test_max_runs_leaves_a_replayable_best_so_far(tmp_path):
    oracle = Oracle()
    s = _search(oracle, Budget(max_runs=12), tmp_path)
    assert s.run() == BUDGET
    assert len(oracle.calls) == 12
    best = load_plan(tmp_path / MIN_PLAN)  # the replay's own loader
    assert size(best) < size(_plan())


def test_max_time_counts_the_clock_across_runs():
    ticks = iter(range(0, 10_000, 10))
    oracle = Oracle()
    record = new_record("r", [KIND], Budget(max_runs=None, max_time=95.0))
    s = Search(_plan(), oracle, record, clock=lambda: next(ticks))
    assert s.run() == BUDGET
    assert s.record["why"] == "--max-time 95 s spent"


def test_other_kinds_do_not_reproduce():
    oracle = Oracle()
    record = new_record("r", ["duplicate"], Budget(tries=2))
    assert Search(_plan(), oracle, record).run() == NOT_REPRODUCED


def test_ctrl_c_leaves_the_best_so_far_and_resume_finishes_the_same_search(tmp_path):
    whole = Oracle()
    done = _search(whole, tmp=tmp_path / "whole")
    done.run()
    expected = (tmp_path / "whole" / MIN_PLAN).read_text()

    first = Oracle()
    first.interrupt_at = 12
    with pytest.raises(KeyboardInterrupt):
        _search(first, tmp=tmp_path / "cut").run()
    record = read_record(tmp_path / "cut")
    assert record["status"] == INTERRUPTED and record["runs"] == 11
    best = load_plan(tmp_path / "cut" / MIN_PLAN)
    assert digest(best) in {digest(_plan()), *(c["digest"] for c in record["candidates"])}
    assert 1 < len(record["path"]) < len(done.record["path"])

    again = Oracle()
    assert Search(_plan(), again, record, directory=tmp_path / "cut").run() == DONE
    assert (tmp_path / "cut" / MIN_PLAN).read_text() == expected
    assert record["path"] == done.record["path"] and record["best"] == done.record["best"]
    # Only the runs not recorded before the interruption were run again.
    assert len(first.calls) + len(again.calls) == len(whole.calls)


def test_confirm_runs_the_minimal_plan_beyond_the_budget():
    oracle = Oracle(p=1.0)
    s = _search(oracle, Budget(tries=1, max_runs=30, confirm=4))
    s.run()
    confirmed = s.record["confirmed"]
    assert confirmed["of"] == s.record["best"] and len(confirmed["runs"]) == 4
    assert all(r["kinds"] == [KIND] for r in confirmed["runs"])
