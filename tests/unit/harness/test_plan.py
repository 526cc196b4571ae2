"""Plans are a pure function of the spec and the seed, and replays read back the same bytes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.plan import build_plan, client_rng, load_plan
from harness.spec import RunSpec, validate
from nemesis.api import TARGETS
from nemesis.registry import FAULT_KINDS, build
from steps.migration import AWAITED, PHASES, STEPS

# Each example builds whole plans (ms each): a thousand cover the space; the CI profile's
# 10,000 cost minutes of `make test` for nothing more.
PLANS = settings(max_examples=1000)

specs = st.builds(
    RunSpec.of,
    topology=st.sampled_from(["kraft-combined", "kraft", "zk", "migration"]),
    nemesis=st.lists(st.sampled_from(sorted(FAULT_KINDS)), unique=True, max_size=5),
    time_limit=st.floats(min_value=1, max_value=600),
    nemesis_interval=st.floats(min_value=0.5, max_value=60),
    concurrency=st.integers(min_value=1, max_value=32),
    rate=st.floats(min_value=0, max_value=1000),
    txn=st.booleans(),
    mode=st.sampled_from(["assign", "subscribe"]),
)
seeds = st.integers(min_value=0, max_value=2**63 - 1)


@PLANS
@given(specs, seeds)
def test_same_spec_and_seed_give_byte_identical_plans(spec, seed):
    validate(spec)
    first = build_plan(spec, seed).to_json()
    # A fresh spec object from the stored one: nothing may depend on object identity.
    again = build_plan(RunSpec.of(**json.loads(first)["spec"]), seed).to_json()
    assert first == again


@PLANS
@given(specs, seeds)
def test_every_fault_step_is_valid_and_alternates_start_stop(spec, seed):
    plan = build_plan(spec, seed)
    if not spec.nemesis:
        assert plan.faults == []
        return
    for i, step in enumerate(plan.faults):
        assert step.fault in spec.nemesis
        assert step.kind in FAULT_KINDS[step.fault]
        assert step.target is None or step.target in TARGETS
        assert 0 < step.at_s < spec.time_limit
        assert step.action == ("start" if i % 2 == 0 else "stop")
        if step.action == "stop":
            start = plan.faults[i - 1]
            assert (start.fault, start.kind, start.target, start.seed) == (
                step.fault,
                step.kind,
                step.target,
                step.seed,
            )
            assert step.at_s > start.at_s
    if spec.topology in ("kraft", "kraft-combined"):
        assert all(s.target != "zk-leader" for s in plan.faults)


@PLANS
@given(specs, seeds)
def test_every_step_a_plan_can_hold_is_accepted_by_its_nemesis(spec, seed):
    # The plan writes parameters and the nemesis reads them: this keeps the two vocabularies one.
    nemeses = build(sorted(FAULT_KINDS))
    for step in build_plan(spec, seed).faults:
        nemeses[step.fault].check(step)


@PLANS
@given(specs, seeds, seeds)
def test_the_seed_is_recorded_and_different_seeds_choose_differently(spec, a, b):
    pa, pb = build_plan(spec, a), build_plan(spec, b)
    assert pa.seed == pa.spec["seed"] == a
    if a != b:
        assert pa.to_json() != pb.to_json()
        assert client_rng(a, 0).random() != client_rng(b, 0).random()


def test_a_stored_plan_loads_back_to_the_same_bytes(tmp_path):
    spec = RunSpec.of(nemesis=["kill", "partition"], time_limit=120, nemesis_interval=7)
    plan = build_plan(spec, 42)
    (tmp_path / "plan.json").write_text(plan.to_json())
    assert load_plan(tmp_path).to_json() == plan.to_json()


def test_options_change_the_plan():
    base = build_plan(RunSpec.of(nemesis=["kill"], time_limit=60), 42)
    longer = build_plan(RunSpec.of(nemesis=["kill"], time_limit=120), 42)
    assert len(longer.faults) > len(base.faults)
    # The schedule of the first minute is a prefix of the longer one: same seed, same choices.
    assert longer.faults[: len(base.faults)] == base.faults


@PLANS
@given(specs, seeds)
def test_a_migration_plan_rolls_every_node_once_per_phase_in_kip_866_order(spec, seed):
    plan = build_plan(spec, seed)
    if spec.topology != "migration":
        assert plan.steps_of("migration") == [] and "migration" not in json.loads(plan.to_json())
        return
    steps = plan.steps_of("migration")
    # The phases in the guide's order, each restart phase naming every node of its role once.
    order = [s.step for s in steps]
    assert sorted(set(order), key=order.index) == list(STEPS)
    assert order == sorted(order, key=STEPS.index)
    for kind in PHASES:
        nodes = [s.node for s in steps if s.step == kind]
        expected = ["c1", "c2", "c3"] if kind == "finalize-controller" else ["b1", "b2", "b3"]
        assert sorted(nodes) == expected
    assert all(s.node is None for s in steps if s.step in AWAITED)
    # A step never may begin before the one before it, and all may begin within the run.
    times = [s.at_s for s in steps]
    assert times == sorted(times) and times[0] == 0.0 and times[-1] < spec.time_limit


def test_a_migration_plan_loads_back_and_the_fault_schedule_is_unchanged_by_it(tmp_path):
    spec = RunSpec.of(topology="migration", nemesis=["kill"], time_limit=300, nemesis_interval=15)
    plan = build_plan(spec, 42)
    (tmp_path / "plan.json").write_text(plan.to_json())
    assert load_plan(tmp_path).to_json() == plan.to_json()
    assert load_plan(tmp_path).steps_of("migration") == plan.steps_of("migration")
    # The migration has a random stream of its own: the faults are those of the same spec
    # without it (same targets allowed), so adding the migration moved no fault.
    other = build_plan(
        RunSpec.of(topology="kraft", nemesis=["kill"], time_limit=300, nemesis_interval=15), 42
    )
    assert [(f.at_s, f.action) for f in plan.faults] == [(f.at_s, f.action) for f in other.faults]
    # Seeded: another seed rolls the brokers in another order or at another time.
    assert any(
        build_plan(spec, s).steps_of("migration") != plan.steps_of("migration")
        for s in range(43, 48)
    )
