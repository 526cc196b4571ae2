"""The step families' registry: what the plan and the interpreter loop over."""

from __future__ import annotations

import pkgutil

import steps
from harness.plan import build_plan, load_plan
from harness.spec import RunSpec
from steps.registry import FAMILIES, node_properties


def test_each_family_has_its_own_key_and_every_family_module_is_listed():
    keys = [f.key for f in FAMILIES]
    assert len(keys) == len(set(keys))
    declared = {
        name
        for _, name, _ in pkgutil.iter_modules(steps.__path__)
        if hasattr(__import__(f"steps.{name}", fromlist=["FAMILY"]), "FAMILY")
    }
    listed = {f.__module__ for f in (f.plan for f in FAMILIES)}
    assert {f"steps.{n}" for n in declared} == listed


def test_a_spec_that_asks_for_no_steps_plans_none_and_needs_no_node_properties():
    plan = build_plan(RunSpec(), 7)
    assert plan.steps == {}
    assert not {f.key for f in FAMILIES} & plan.to_dict().keys()
    assert node_properties(plan.steps) == {}


def test_each_familys_steps_load_back_from_plan_json(tmp_path):
    spec = RunSpec.of(topology="migration", upgrade_to="4.0", time_limit=300)
    plan = build_plan(spec, 11)
    assert set(plan.steps) == {"migration", "upgrade"}
    (tmp_path / "plan.json").write_text(plan.to_json())
    again = load_plan(tmp_path)
    assert again.steps == plan.steps and again.to_json() == plan.to_json()
