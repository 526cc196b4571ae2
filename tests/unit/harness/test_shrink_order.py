"""What `kchaos shrink` tries first and what it does not try again, against scripted oracles
(pure functions deciding from a candidate plan whether its replay fails; bench/bench_shrink.py):

- the suspects (harness/shrink/suspects.py), read from a run's findings and nemesis timeline:
  the stored original of docs/shrink.md's worked example (tests/unit/harness/data/shrink_real)
  and hand-written runs;
- ddmin's candidates ordered by them, the result unchanged, the runs fewer;
- a candidate no bigger than one rejected (the plan with no faults after each spec change) is
  presumed, not run.

The run counts are deterministic (the oracles' draws are seeded per plan and try); their sums
over many cases are bench/bench_shrink.py's, in docs/shrink.md."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.bench_shrink import (
    FAILING,
    ScriptedOracle,
    generated,
    real_example,
    real_oracle,
    shrink,
)
from harness.plan import Plan, build_plan
from harness.shrink.candidates import KEEP, ddmin_candidates, describe_unit, fault_units
from harness.shrink.search import Budget, Search, dominated, new_record, read_record
from harness.shrink.suspects import score, unit_scores
from harness.spec import RunSpec, validate


def _units(plan: Plan) -> list[str]:
    return [describe_unit(plan.faults, u) for u in fault_units(plan.faults)]


def _kept_seeds(plan: Plan) -> set[int]:
    return {s.seed for s in plan.faults}


# The suspects ---------------------------------------------------------------------------------
def test_the_worked_example_points_at_its_corruption_and_away_from_the_kill():
    plan, scores = real_example()
    by_unit = {
        d: score(plan, u, scores)
        for d, u in zip(_units(plan), fault_units(plan.faults), strict=True)
    }
    # The corruption damaged the partition the finding names (kchaos-queue-6, on n1); the kill
    # hit n3, which the finding does not name; the others touched n1 or n2 (its holder).
    assert by_unit == {
        "pause:one at 3 s": 1,
        "partition:isolate-active-controller at 9 s": 1,
        "disk:corrupt@one at 15 s": 2,
        "kill:one at 21 s": 0,
        "pause:minority at 27 s": 1,
        "partition:random-halves at 39 s": 1,
    }


def _run_dir(tmp_path: Path, findings: list[dict], timeline: list[dict] | None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "results.json").write_text(json.dumps({"status": "invalid", "findings": findings}))
    if timeline is not None:
        (tmp_path / "nemesis.json").write_text(json.dumps({"timeline": timeline}))
    return tmp_path


def _killed(at: float, node: str) -> dict:
    effects = [{"effect": "down", "nodes": [node]}]
    return {"at_s": at, "f": "start-kill", "type": "ok", "value": {"effects": effects}}


def _kill_plan() -> Plan:
    plan = build_plan(
        validate(RunSpec.of(nemesis=["kill"], time_limit=30.0, nemesis_interval=3.0)), 3
    )
    assert len(fault_units(plan.faults)) >= 2
    return plan


def test_without_evidence_every_unit_scores_nothing(tmp_path):
    plan = _kill_plan()
    starts = [s for s in plan.faults if s.action == "start"]
    lost = {"kind": FAILING, "data": {"broker": "n1"}, "tolerated": None}
    timeline = [_killed(s.at_s, "n1") for s in starts]
    # No nemesis.json; a finding that names no node or partition; a tolerated one; another kind.
    assert unit_scores(_run_dir(tmp_path / "a", [lost], None), plan, [FAILING]) == {}
    bare = {"kind": FAILING, "data": {"count": 3}, "tolerated": None}
    assert unit_scores(_run_dir(tmp_path / "b", [bare], timeline), plan, [FAILING]) == {}
    tolerated = {**lost, "tolerated": "allowed"}
    assert unit_scores(_run_dir(tmp_path / "c", [tolerated], timeline), plan, [FAILING]) == {}
    assert unit_scores(_run_dir(tmp_path / "d", [lost], timeline), plan, ["duplicate"]) == {}
    # Named and touched: every kill of n1 is a suspect.
    scores = unit_scores(_run_dir(tmp_path / "e", [lost], timeline), plan, [FAILING])
    assert {score(plan, u, scores) for u in fault_units(plan.faults)} == {1}


def test_a_unit_is_suspect_by_what_it_touched_in_the_run(tmp_path):
    plan = _kill_plan()
    starts = [s for s in plan.faults if s.action == "start"]
    timeline = [_killed(s.at_s, "n1" if i == 1 else "n2") for i, s in enumerate(starts)]
    finding = {"kind": FAILING, "data": {"broker": "n1", "partition": 4}, "tolerated": None}
    scores = unit_scores(_run_dir(tmp_path, [finding], timeline), plan, [FAILING])
    got = [score(plan, u, scores) for u in fault_units(plan.faults)]
    assert got[1] == 1 and got.count(1) == 1 and got.count(0) == len(got) - 1


# The order of ddmin's candidates ----------------------------------------------------------------
def test_ddmin_tries_the_suspects_first_and_drops_the_innocent_first():
    plan, scores = real_example()
    first, *rest = ddmin_candidates(plan, 2, scores)
    assert first.move == KEEP and _units(first.plan) == ["disk:corrupt@one at 15 s"]
    keeps = [c for c in rest if c.move == KEEP]
    # Chunked from the least suspect (1, 2, 4) to the most (3, 5, 6); the most suspect kept first.
    assert [_units(c.plan)[0] for c in keeps] == ["disk:corrupt@one at 15 s", "pause:one at 3 s"]
    at4 = ddmin_candidates(plan, 6, scores)
    drops = [c for c in at4 if c.move != KEEP]
    # Dropped one at a time: the kill (it touched nothing the finding names) first, the
    # corruption last.
    missing = [set(_units(plan)) - set(_units(c.plan)) for c in drops]
    assert missing[0] == {"kill:one at 21 s"} and missing[-1] == {"disk:corrupt@one at 15 s"}


def test_without_scores_or_with_equal_ones_ddmin_keeps_the_plans_order():
    plan, _ = real_example()
    flat = {str(s.seed): 1 for s in plan.faults}
    for n in (1, 2, 3, 6):
        plain = [(c.move, c.what, c.plan.to_json()) for c in ddmin_candidates(plan, n)]
        assert [
            (c.move, c.what, c.plan.to_json()) for c in ddmin_candidates(plan, n, flat)
        ] == plain
    assert ddmin_candidates(plan, 2)[0].what == "keep fault units 1-3 of 6 (pause:one at 3 s...)"


# The worked example: runs before and after ---------------------------------------------------
def test_the_worked_example_needs_fewer_runs_and_shrinks_to_the_same_plan():
    plan, scores = real_example()
    before = shrink(plan, real_oracle(plan, False), {}, presume=False)
    after = shrink(plan, real_oracle(plan, False), scores, presume=True)
    assert before.status == after.status == "done"
    assert after.best.to_json() == before.best.to_json()
    assert _units(after.best) == ["disk:corrupt@one at 15 s"]
    # Before: ddmin's 6 runs (as the real shrink's record shows), the plan with no faults run
    # again after each spec change. After: the corruption kept alone at its first run, the plan
    # with no faults run once. The original's 2 tries in both (docs/shrink.md's numbers).
    assert (before.runs, after.runs) == (17, 10)
    no_faults = [c for c in after.record["candidates"] if c["size"]["faults"] == 0]
    assert len(no_faults) == 3
    assert [len(c["runs"]) for c in no_faults] == [2, 0, 0]
    assert all(c["presumed"] == no_faults[0]["id"] for c in no_faults[1:])


@pytest.mark.parametrize("seed", range(3))
def test_a_flaky_worked_example_keeps_its_cause_in_either_order(seed):
    plan, scores = real_example()
    corrupt = {s.seed for s in plan.faults if s.kind == "corrupt"}
    for suspects, presume in (({}, False), (scores, True)):
        out = shrink(plan, real_oracle(plan, True, f"{seed}"), suspects, presume, tries=3)
        assert corrupt <= _kept_seeds(out.best)


# The plan with no faults, once -------------------------------------------------------------------
def test_the_plan_with_no_faults_runs_once_across_spec_changes():
    plan = _kill_plan()
    cause = min(s.seed for s in plan.faults)
    runs = {}
    for presume in (False, True):
        oracle = ScriptedOracle(lambda p: 1.0 if cause in _kept_seeds(p) else 0.0)
        record = new_record("r", [FAILING], Budget(tries=3))
        Search(plan, oracle, record, presume=presume).run()
        bare = [c for c in record["candidates"] if c["size"]["faults"] == 0]
        # After ddmin the spec changed (time limit, concurrency, rate, duration): each change
        # gave a new plan with no faults.
        assert len(bare) >= 2
        runs[presume] = [len(c["runs"]) for c in bare]
        if presume:
            # At most the first is run (or none: a rejected keep of other units implies it).
            assert all(c["presumed"] and c["reproduced"] is False for c in bare[1:])
    assert runs[False] == [3] * len(runs[False])
    assert sum(runs[True]) <= 3 and runs[True][1:] == [0] * (len(runs[True]) - 1)


def test_dominated_is_about_the_same_faults_and_steps_at_no_larger_spec():
    plan = _kill_plan()
    fewer = replace(plan, faults=plan.faults[2:])
    assert dominated(fewer, plan) and dominated(plan, plan) and not dominated(plan, fewer)
    shorter = replace(fewer, spec={**fewer.spec, "time_limit": 10.0, "concurrency": 1})
    assert dominated(shorter, plan) and not dominated(plan, shorter)
    other = replace(fewer, spec={**fewer.spec, "acks": "1"})
    assert not dominated(other, plan)
    moved = replace(fewer, faults=[replace(fewer.faults[0], at_s=fewer.faults[0].at_s + 0.5)])
    assert not dominated(moved, plan)


def test_a_resumed_search_orders_and_presumes_as_the_first_part_did(tmp_path):
    plan, scores = real_example()
    whole = new_record("r", [FAILING], Budget(tries=2))
    whole["suspects"] = scores
    Search(plan, real_oracle(plan, False), whole).run()
    cut = new_record("r", [FAILING], Budget(tries=2, max_runs=4))
    cut["suspects"] = scores
    Search(plan, real_oracle(plan, False), cut, directory=tmp_path).run()
    record = read_record(tmp_path)
    record["max_runs"] = None
    again = real_oracle(plan, False)
    Search(plan, again, record, directory=tmp_path).run()
    assert [c["digest"] for c in record["candidates"]] == [c["digest"] for c in whole["candidates"]]
    assert record["path"] == whole["path"] and record["runs"] == whole["runs"]


# Generated plans ---------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.booleans())
def test_generated_shrinks_keep_their_cause_and_the_suspects_never_cost_more_when_right(
    case: int, informative: bool
) -> None:
    plan, oracle, scores = generated(case, informative)
    if not fault_units(plan.faults):
        return
    before = shrink(plan, ScriptedOracle(oracle.p), {}, presume=False)
    after = shrink(plan, ScriptedOracle(oracle.p), scores, presume=True)
    # The oracle is exact (the cause's units all kept: fails, every time), so both searches end
    # at the cause's units alone, whatever the order.
    assert before.status == after.status == "done"
    assert _units(after.best) == _units(before.best)
    assert oracle.p(after.best) == 1.0
    top = max(scores.values(), default=0)
    cause = [
        u for u in fault_units(plan.faults) if _kept_seeds(after.best) & {plan.faults[u[0]].seed}
    ]
    if all(score(plan, u, scores) == top for u in cause) and len(cause) <= 1:
        # The suspects are right (the cause alone scores highest): never more runs.
        assert after.runs <= before.runs
