"""The run option availability (report | fail): what a spurious fence does to the verdict
(checkers/families/metadata_log/liveness.py). Unset or "report", plan.json is what it always was."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from checkers.families.metadata_log.liveness import read_availability
from harness.cli import main
from harness.plan import build_plan
from harness.spec import RunSpec, SpecError, spec_from_dict


def test_unset_or_report_leaves_the_plan_byte_identical():
    plain = build_plan(RunSpec(), 7).to_json()
    assert "availability" not in json.loads(plain)["spec"]
    assert build_plan(spec_from_dict({"availability": "report"}), 7).to_json() == plain


def test_fail_is_recorded_in_the_plan_and_read_back_by_the_checker(tmp_path):
    plan = build_plan(spec_from_dict({"availability": "fail"}), 7)
    assert json.loads(plan.to_json())["spec"]["availability"] == "fail"
    assert plan.run_spec().availability == "fail"
    (tmp_path / "plan.json").write_text(plan.to_json())
    assert read_availability(tmp_path) == "fail"
    (tmp_path / "plan.json").write_text(build_plan(RunSpec(), 7).to_json())
    assert read_availability(tmp_path) == "report"
    assert read_availability(tmp_path / "nowhere") == "report"


def test_an_unknown_value_is_one_sentence():
    with pytest.raises(SpecError, match="unknown availability 'strict'"):
        spec_from_dict({"availability": "strict"})


def test_the_cli_option_reaches_the_plan():
    r = CliRunner().invoke(main, ["run", "--availability", "fail", "--seed", "3", "--plan-only"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["spec"]["availability"] == "fail"
    r = CliRunner().invoke(main, ["run", "--seed", "3", "--plan-only"])
    assert "availability" not in json.loads(r.output)["spec"]
