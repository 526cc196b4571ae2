"""User-named feature steps (--features): the forms a spec may use and the one sentence for any
other, where the plan puts them (after every roll, seeded, only when asked for), and how the
driver chooses upgrade or downgrade against the finalized level at step time."""

from __future__ import annotations

import json

import pytest

from checkers.analyze.scenario import scenario
from harness.campaign.spec import expand
from harness.plan import build_plan, load_plan
from harness.run.recorder import Recorder
from harness.spec import RunSpec, SpecError, scenario_terms, spec_from_dict
from steps.feature_steps import (
    AUTO,
    FeatureItem,
    FeatureSpecError,
    known_features,
    parse_features,
)
from steps.upgrade import FEATURES, ROLL, UpgradeStep, upgrade_schedule
from tests.unit.steps.test_upgrade import VIEWS, Scripted, _run

TV, GV, MV = "transaction.version", "group.version", "metadata.version"


def test_the_forms_read_as_items_in_order():
    items = parse_features(
        "transaction.version=2, dry-run:group.version=0,metadata.version=release:4.0,"
        "transaction.version=0!unsafe",
        "4.1",
    )
    assert items == [
        FeatureItem(TV, 2),
        FeatureItem(GV, 0, dry_run=True),
        FeatureItem(MV, "release:4.0"),
        FeatureItem(TV, 0, unsafe=True),
    ]
    assert [i.action for i in items] == [AUTO, AUTO, AUTO, "downgrade"]


def test_features_each_line_knows():
    assert known_features("3.8") == (MV,)
    assert TV in known_features("3.9.2") and GV not in known_features("3.9")
    assert GV in known_features("4.0") and "share.version" not in known_features("4.0")
    assert "share.version" in known_features("4.3.1") and known_features("4.2") == known_features(
        "4.1"
    )


@pytest.mark.parametrize(
    ("text", "version", "says"),
    [
        ("foo=1", "4.1", "'foo' in 'foo=1' is no feature Kafka 4.1 can finalize: it knows"),
        ("group.version=1", "3.9", "it knows metadata.version, kraft.version, transaction"),
        ("group.version", "4.1", "cannot read 'group.version': the forms are name=level"),
        ("group.version=1!safe", "4.1", "the forms are"),
        ("transaction.version=release:4.0", "4.1", "only metadata.version takes a release"),
        ("metadata.version=release:4.3", "4.1", "a release from 3.3"),
        ("metadata.version=release:3.1", "4.1", "a release from 3.3"),
        ("metadata.version=release:3..9", "4.1", "is not a Kafka version"),
        ("", "4.1", "name at least one item"),
    ],
)
def test_anything_else_is_one_sentence_naming_the_forms(text, version, says):
    with pytest.raises(FeatureSpecError, match="features: ") as err:
        parse_features(text, version)
    assert says in str(err.value)


def test_the_spec_checks_the_items_against_the_release_the_steps_run_on():
    with pytest.raises(SpecError, match=r"no feature Kafka 3.8 can finalize"):
        spec_from_dict({"version": "3.8", "features": "transaction.version=0"})
    # After an upgrade to 4.1 the steps run on 4.1, which knows group.version.
    spec_from_dict({"version": "3.9", "upgrade_to": "4.1", "features": "group.version=0"})
    with pytest.raises(SpecError, match=r"ZooKeeper mode has no metadata\.version"):
        spec_from_dict({"topology": "zk", "version": "3.8", "features": "metadata.version=20"})


def test_plans_without_the_option_do_not_change_and_name_no_features():
    spec = RunSpec.of(version="3.8", upgrade_to="3.9")
    assert "features" not in build_plan(spec, 4).to_dict()["spec"]
    assert upgrade_schedule("kraft-combined", 90, 4, None, None) == []


def test_each_item_is_one_seeded_step_spread_over_the_run_after_any_roll():
    spec = spec_from_dict(
        {
            "version": "3.9",
            "upgrade_to": "4.1",
            "time_limit": 100,
            "features": "transaction.version=0,transaction.version=2,dry-run:group.version=0",
        }
    )
    plan = build_plan(spec, 9)
    alone = build_plan(RunSpec.of(version="3.9", upgrade_to="4.1", time_limit=100), 9)
    # The upgrade's own steps are drawn first: exactly those of the plan without the option.
    assert plan.steps_of("upgrade")[: len(alone.steps_of("upgrade"))] == alone.steps_of("upgrade")
    mine = plan.steps_of("upgrade")[len(alone.steps_of("upgrade")) :]
    assert [(s.step, s.params["feature"], s.params["level"]) for s in mine] == [
        (FEATURES, TV, 0),
        (FEATURES, TV, 2),
        (FEATURES, GV, 0),
    ]
    assert [s.params["dry_run"] for s in mine] == [False, False, True]
    last_roll = max(s.at_s for s in plan.steps_of("upgrade") if s.step == ROLL)
    times = [s.at_s for s in mine]
    assert times == sorted(times) and times[0] > last_roll and times[-1] <= 85
    assert plan.to_json() == build_plan(spec, 9).to_json()
    assert plan.to_json() != build_plan(spec, 10).to_json()


def test_alone_the_steps_spread_over_most_of_the_run_and_replay(tmp_path):
    spec = spec_from_dict({"version": "4.1", "time_limit": 90, "features": "group.version=0"})
    plan = build_plan(spec, 3)
    ((step,),) = [plan.steps_of("upgrade")]
    assert 9 <= step.at_s <= 72 and step.params["action"] == AUTO
    (tmp_path / "plan.json").write_text(plan.to_json())
    assert load_plan(tmp_path).steps_of("upgrade") == plan.steps_of("upgrade")
    assert json.loads(plan.to_json())["spec"]["features"] == "group.version=0"


def test_with_quorum_steps_the_users_steps_are_merged_by_time():
    spec = spec_from_dict(
        {
            "topology": "kraft",
            "version": "4.1",
            "quorum": "dynamic",
            "time_limit": 100,
            "features": "group.version=0,group.version=1",
        }
    )
    steps = build_plan(spec, 5).steps_of("upgrade")
    assert [s.at_s for s in steps] == sorted(s.at_s for s in steps)
    assert [s.step for s in steps if s.step != FEATURES] == [
        "remove-controller",
        "reprovision-controller",
        "add-controller",
    ]


def test_the_option_is_a_scenario_option_and_a_campaign_axis():
    spec = RunSpec.of(version="4.1", features="transaction.version=0").to_dict()
    assert scenario(spec, scenario_terms()).endswith("features=transaction.version=0")
    camp = expand(
        {
            "base": {"version": "4.1", "time_limit": 60},
            "axes": {"features": ["transaction.version=0", "group.version=0"]},
        }
    )
    assert [c.options["features"] for c in camp.cells] == [
        "transaction.version=0",
        "group.version=0",
    ]
    with pytest.raises(SpecError, match=r"no feature Kafka 4.1 can finalize"):
        expand({"base": {"version": "4.1"}, "axes": {"features": ["nope=1"]}})


# The driver: upgrade or downgrade, against the finalized level at step time ---------------------
def _user_step(feature, level, **kw):
    params = {"action": AUTO, "feature": feature, "level": level, "dry_run": False, "unsafe": False}
    return UpgradeStep(0.0, FEATURES, "n1", {**params, **kw})


def test_the_direction_is_chosen_against_the_highest_epoch_answer(tmp_path):
    views = json.loads(json.dumps(VIEWS))
    views["n1"]["finalized"] = {MV: 21, GV: 1}  # epoch 40: the newest answer
    views["n2"]["finalized"] = {MV: 20}  # epoch 38: behind
    steps = [_user_step(GV, 0), _user_step(GV, 1), _user_step(MV, 22)]
    rec = Recorder(tmp_path / "history.jsonl", "test")
    ops = _run(tmp_path, Scripted(rec, steps, views))
    assert [(o["value"]["params"]["action"], o["value"]["params"]["from"]) for o in ops] == [
        ("downgrade", 1),
        ("upgrade", 1),  # the same level: an upgrade, which Kafka accepts
        ("upgrade", 21),
    ]
    assert [o["value"]["params"]["levels"] for o in ops] == [{GV: 0}, {GV: 1}, {MV: 22}]


def test_an_unsafe_item_is_a_downgrade_whatever_the_level(tmp_path):
    step = UpgradeStep(
        0.0,
        FEATURES,
        "n1",
        {"action": "downgrade", "feature": MV, "level": 19, "dry_run": False, "unsafe": True},
    )
    rec = Recorder(tmp_path / "history.jsonl", "test")
    (op,) = _run(tmp_path, Scripted(rec, [step], VIEWS))
    assert op["value"]["params"]["action"] == "downgrade" and op["value"]["params"]["unsafe"]
    assert "from" not in op["value"]["params"]


def test_no_answer_to_compare_with_is_a_refusal_not_a_guess(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl", "test")
    (op,) = _run(tmp_path, Scripted(rec, [_user_step(GV, 0)], {}))
    assert op["type"] == "fail" and "no finalized level to compare" in op["error"]


def test_the_recorded_answer_keeps_kafkas_refusal_after_the_tools_logging_noise():
    from steps.upgrade import feature_outcome

    refusal = (
        "Could not downgrade metadata.version to 21. Invalid metadata.version 21. Unsafe "
        "metadata downgrade is not supported in this version.\n"
    )
    noise = "at org.slf4j.LoggerFactory.getLogger(LoggerFactory.java:363) " * 40
    kind, said = feature_outcome(
        1, refusal, noise + "1 out of 1 operation(s) failed.", MV, 21, False
    )
    assert kind == "fail" and said.endswith("not supported in this version.")
