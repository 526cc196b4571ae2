"""The upgrade steps as plan data, the outcome of Kafka's feature tool, and which version changes
a spec may ask for."""

from __future__ import annotations

import json

import pytest

from clusters.errors import ClusterError
from clusters.upgrade_paths import check_downgrade, check_upgrade
from harness.plan import build_plan, load_plan
from harness.run.recorder import Recorder
from harness.spec import RunSpec, SpecError, spec_from_dict
from history.reader import read_history
from steps.upgrade import (
    FEATURES,
    IBP,
    ROLL,
    UpgradeDriver,
    UpgradeStep,
    feature_outcome,
    node_properties,
    upgrade_schedule,
)


def test_no_upgrade_asked_no_steps_and_no_plan_key():
    plan = build_plan(RunSpec(), 7)
    assert plan.steps_of("upgrade") == [] and "upgrade" not in plan.to_dict()
    assert "upgrade_to" not in plan.to_dict()["spec"]


def test_an_upgrade_rolls_every_kafka_node_once_then_finalizes_the_features():
    steps = upgrade_schedule("kraft", 120, 5, "3.9", None)
    rolls = [s for s in steps if s.step == ROLL]
    assert sorted(s.node for s in rolls) == ["b1", "b2", "b3", "c1", "c2", "c3"]
    assert {s.params["to"] for s in rolls} == {"3.9"}
    feats = [s.params for s in steps if s.step == FEATURES]
    assert [(p["feature"], p["dry_run"]) for p in feats] == [
        ("metadata.version", True),
        ("metadata.version", False),
        ("*", False),
    ]
    assert all(s.node.startswith("b") for s in steps if s.step == FEATURES)
    assert [s.at_s for s in steps] == sorted(s.at_s for s in steps)


def test_the_same_seed_gives_the_same_steps_and_they_survive_plan_json():
    spec = spec_from_dict({"version": "3.8", "upgrade_to": "3.9", "downgrade_to": "3.8.0"})
    a, b = build_plan(spec, 11), build_plan(spec, 11)
    assert a.to_json() == b.to_json()
    assert upgrade_schedule("kraft-combined", 30, 11, "3.9", None) != upgrade_schedule(
        "kraft-combined", 30, 12, "3.9", None
    )


def test_a_stored_plan_replays_its_upgrade_steps(tmp_path):
    spec = spec_from_dict({"version": "3.8", "upgrade_to": "3.9"})
    plan = build_plan(spec, 3)
    (tmp_path / "plan.json").write_text(plan.to_json())
    again = load_plan(tmp_path)
    assert (
        again.steps_of("upgrade") == plan.steps_of("upgrade") and again.to_json() == plan.to_json()
    )
    assert json.loads(plan.to_json())["spec"]["upgrade_to"] == "3.9"


def test_zookeeper_mode_bumps_the_protocol_version_instead_of_feature_levels():
    steps = upgrade_schedule("zk", 120, 2, "3.9", None)
    assert {s.step for s in steps} == {ROLL, IBP}
    assert sorted(s.node for s in steps if s.step == IBP) == ["b1", "b2", "b3"]
    assert {s.params["ibp"] for s in steps if s.step == IBP} == {"3.9"}


def test_a_downgrade_lowers_metadata_version_before_rolling_back():
    steps = upgrade_schedule("kraft-combined", 120, 2, None, "3.8")
    assert [(s.step, s.params["action"], s.params["dry_run"]) for s in steps[:2]] == [
        (FEATURES, "downgrade", True),
        (FEATURES, "downgrade", False),
    ]
    assert {s.params["level"] for s in steps[:2]} == {"release:3.8"}
    # KIP-778: the software downgrade only once every node holds the downgrade snapshot.
    assert steps[2].step == "await-snapshot" and node_properties(steps)
    assert [s.step for s in steps[3:]] == [ROLL] * 3
    assert node_properties(upgrade_schedule("kraft-combined", 120, 2, "3.9", None)) == {}


def test_after_a_migration_the_upgrade_comes_after_its_finalization_window():
    steps = upgrade_schedule("migration", 300, 2, "4.0", None)
    assert min(s.at_s for s in steps) >= 0.7 * 300
    assert all(not s.node.startswith("z") for s in steps if s.step == ROLL)


@pytest.mark.parametrize(
    ("topology", "a", "b", "why"),
    [
        ("kraft", "3.9", "3.8", "not newer"),
        ("kraft", "3.2", "3.9", "3.3"),
        ("zk", "3.9", "4.0", "migrate first"),
    ],
)
def test_upgrades_kafka_documents_no_path_for_are_refused_with_the_reason(topology, a, b, why):
    with pytest.raises(ClusterError, match=why):
        check_upgrade(topology, a, b)


def test_documented_upgrades_pass():
    for topology, a, b in [
        ("kraft", "3.8", "3.9"),
        ("kraft-combined", "3.3", "4.3"),
        ("zk", "3.8", "3.9"),
        ("migration", "3.9", "4.0"),
    ]:
        check_upgrade(topology, a, b)


def test_downgrades_need_an_older_kraft_release_with_metadata_version():
    check_downgrade("kraft", "3.9", "3.8", None)
    check_downgrade("kraft", "3.8", "3.8.0", "3.9")
    for args, why in [
        (("kraft", "3.9", "4.0", None), "not older"),
        (("kraft", "3.9", "3.2", None), "metadata.version"),
        (("zk", "3.9", "3.8", None), "KRaft"),
    ]:
        with pytest.raises(ClusterError, match=why):
            check_downgrade(*args)


def test_a_cluster_formatted_by_4_4_or_newer_cannot_roll_back_below_it():
    for version, to in [("4.4", "4.3"), ("4.4.0", "3.9"), ("4.5", "4.4")]:
        with pytest.raises(ClusterError, match=r"newer than, the kafka-storage tool"):
            check_downgrade("kraft-combined", version, to, None)
    # Formatted by 4.3's tool: the rollback after an upgrade to 4.4 is the KIP-778 path.
    check_downgrade("kraft-combined", "4.3", "4.3.0", "4.4")
    check_downgrade("kraft", "4.3", "4.2", None)


def test_the_spec_refuses_an_undocumented_path_in_one_sentence():
    with pytest.raises(SpecError, match=r"Kafka 4\.0 removed ZooKeeper"):
        spec_from_dict({"topology": "zk", "version": "3.9", "upgrade_to": "4.0"})


# What Kafka's kafka-features prints (tools FeatureCommand.update) -------------------------------
def test_an_acknowledged_update_is_ok():
    out = "metadata.version was upgraded to 21.\n"
    assert feature_outcome(0, out, "", "metadata.version", 21, False)[0] == "ok"
    dry = "metadata.version can be upgraded to 21.\n"
    assert feature_outcome(0, dry, "", "metadata.version", 21, True)[0] == "ok"
    assert feature_outcome(0, dry, "", "metadata.version", 21, False)[0] == "info"


def test_a_refusal_from_the_controller_is_fail():
    out = (
        "Could not downgrade metadata.version to 7. Refusing to perform the requested downgrade "
        "because it might delete metadata information.\n"
    )
    assert (
        feature_outcome(1, out, "1 out of 1 operation(s) failed.", "metadata.version", 7, False)[0]
        == "fail"
    )
    out = (
        "Could not upgrade group.version to 1. Invalid update version 1 for feature group.version."
    )
    assert feature_outcome(1, out, "", "group.version", 1, False)[0] == "fail"


def test_a_timeout_or_a_lost_connection_is_info():
    out = "Could not upgrade metadata.version to 21. Timed out waiting for a node assignment."
    assert feature_outcome(1, out, "", "metadata.version", 21, False)[0] == "info"
    assert feature_outcome(137, "", "", "metadata.version", 21, False)[0] == "info"


# The driver's bookkeeping ----------------------------------------------------------------------
class _Info:
    version = "3.8.1"
    timing = "fast"
    cluster_id = "x"


class _Spec:
    def __init__(self, name):
        self.name, self.is_zookeeper, self.is_broker = name, False, True


class _Node:
    def __init__(self, name):
        self.spec = _Spec(name)


class _Dist:
    version = "3.8.1"


class Scripted(UpgradeDriver):
    """Feature steps resolve against scripted views; carrying a step out is scripted too."""

    def __init__(self, recorder, steps, views, outcome=None, after=None):
        nodes = {n: _Node(n) for n in ("n1", "n2")}
        # A short bound: a node that never answers must not hold a unit test for minutes.
        super().__init__(
            steps, _Info(), {"3.8.1": _Dist()}, nodes, recorder, after=after, step_timeout=1.0
        )  # type: ignore[arg-type]
        self.views, self.outcome = views, outcome or {}

    def describe(self):
        return self.views

    def _do(self, step, value):
        kind = self.outcome.get(step.step, "ok")
        if kind == "fail":
            from steps.recorded import StepFailed

            raise StepFailed("scripted refusal")
        return {}


def _run(tmp_path, driver):
    driver.start()
    driver._thread.join(10)
    driver.stop()
    driver.recorder.close()
    return [op for op in read_history(tmp_path / "history.jsonl").ops if op["type"] != "invoke"]


VIEWS = {
    "n1": {
        "supported": {
            "metadata.version": [1, 21],
            "group.version": [0, 1],
            "kraft.version": [0, 1],
        },
        "finalized": {"metadata.version": 20},
        "epoch": 40,
    },
    "n2": {
        "supported": {
            "metadata.version": [1, 21],
            "group.version": [0, 1],
            "kraft.version": [0, 1],
        },
        "finalized": {"metadata.version": 20},
        "epoch": 38,
    },
}


def test_every_other_feature_becomes_one_operation_per_feature_with_its_level(tmp_path):
    steps = [
        UpgradeStep(
            0.0,
            FEATURES,
            "n1",
            {
                "action": "upgrade",
                "feature": "metadata.version",
                "level": "latest",
                "dry_run": False,
            },
        ),
        UpgradeStep(
            0.0,
            FEATURES,
            "n1",
            {"action": "upgrade", "feature": "*", "level": "latest", "dry_run": False},
        ),
    ]
    rec = Recorder(tmp_path / "history.jsonl", "test")
    ops = _run(tmp_path, Scripted(rec, steps, VIEWS))
    assert [op["value"]["params"]["levels"] for op in ops] == [
        {"metadata.version": 21},
        {"group.version": 1},  # kraft.version has its own steps (controller membership)
    ]
    assert {op["process"] for op in ops} == {"upgrade"} and {op["type"] for op in ops} == {"ok"}


def test_a_step_for_every_other_feature_completes_the_upgrade_with_several_operations(tmp_path):
    # The migration-then-upgrade run to 4.0 said "ended early: None": its one '*' step became
    # three operations, and completion compared operations with planned steps.
    views = {
        n: {**v, "supported": {**v["supported"], "transaction.version": [0, 2]}}
        for n, v in VIEWS.items()
    }
    step = UpgradeStep(
        0.0,
        FEATURES,
        "n1",
        {"action": "upgrade", "feature": "*", "level": "latest", "dry_run": False},
    )
    driver = Scripted(Recorder(tmp_path / "history.jsonl", "test"), [step], views)
    ops = _run(tmp_path, driver)
    assert len(ops) == 2 and {op["type"] for op in ops} == {"ok"}
    assert driver.completed() and driver.summary()["ended"] is None


def test_a_refused_step_ends_the_upgrade_and_the_rest_is_not_attempted(tmp_path):
    steps = [
        UpgradeStep(
            0.0,
            FEATURES,
            "n1",
            {"action": "upgrade", "feature": "metadata.version", "level": 21, "dry_run": False},
        ),
        UpgradeStep(0.0, ROLL, "n2", {"to": "3.8.1"}),
    ]
    rec = Recorder(tmp_path / "history.jsonl", "test")
    driver = Scripted(rec, steps, VIEWS, outcome={FEATURES: "fail"})
    ops = _run(tmp_path, driver)
    assert [op["type"] for op in ops] == ["fail", "fail"]
    assert "not attempted" in ops[1]["error"] and not driver.completed()


def test_nothing_to_resolve_is_a_refusal_not_a_guess(tmp_path):
    steps = [
        UpgradeStep(
            0.0,
            FEATURES,
            "n1",
            {
                "action": "upgrade",
                "feature": "metadata.version",
                "level": "latest",
                "dry_run": False,
            },
        )
    ]
    rec = Recorder(tmp_path / "history.jsonl", "test")
    ops = _run(tmp_path, Scripted(rec, steps, {}))
    assert ops[0]["type"] == "fail" and "no Kafka node answered" in ops[0]["error"]


def test_an_upgrade_after_an_unfinished_migration_is_not_attempted(tmp_path):
    class Ended:
        process = "migration"
        ended = "kraft-broker b2 ended info"

        class finished:
            @staticmethod
            def wait(_):
                return True

        @staticmethod
        def completed():
            return False

    steps = [UpgradeStep(0.0, ROLL, "n1", {"to": "3.8.1"})]
    rec = Recorder(tmp_path / "history.jsonl", "test")
    ops = _run(tmp_path, Scripted(rec, steps, VIEWS, after=Ended()))
    assert ops[0]["type"] == "fail" and "migration did not complete" in ops[0]["error"]


def test_a_level_is_resolved_once_every_node_answers_not_while_they_restart(tmp_path):
    class Restarting(Scripted):
        """Nobody answers, then one node, then both (the cluster after a kill of every node)."""

        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.answers = [{}, {"n1": VIEWS["n1"]}, VIEWS]

        def describe(self):
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    steps = [
        UpgradeStep(
            0.0,
            FEATURES,
            "n1",
            {
                "action": "upgrade",
                "feature": "metadata.version",
                "level": "latest",
                "dry_run": False,
            },
        )
    ]
    rec = Recorder(tmp_path / "history.jsonl", "test")
    driver = Restarting(rec, steps, VIEWS)
    driver.step_timeout = 30.0
    ops = _run(tmp_path, driver)
    assert ops[0]["type"] == "ok" and ops[0]["value"]["params"]["levels"] == {
        "metadata.version": 21
    }
    assert driver.answers == [VIEWS]


def test_kafka_features_runs_from_the_newest_release_the_run_assembled(tmp_path, monkeypatch):
    # Nothing is looked up in the host cache: a run rolling to 4.4.0 has assembled it before the
    # cluster started, and a run that does not roll there never asks for it.
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "empty-cache"))
    from steps import upgrade

    class Dist:
        def __init__(self, version):
            self.version = version

    class Info:
        version, timing, cluster_id = "4.3", "fast", "x"

        class topology:
            @staticmethod
            def bootstrap_servers():
                return "10.0.0.1:9092"

    dists = {"4.3": Dist("4.3.1"), "4.4": Dist("4.4.0")}
    nodes = {n: _Node(n) for n in ("n1", "n2")}
    recorder = Recorder(tmp_path / "history.jsonl", "r")
    driver = UpgradeDriver([], Info(), dists, nodes, recorder)  # type: ignore[arg-type]
    assert driver.newest_dist() is dists["4.3"]
    driver.versions["n2"] = "4.4.0"  # rolled
    assert driver.newest_dist() is dists["4.4"]
    used = []

    def tool(dist, name, args, timeout):
        used.append((dist.version, name))
        return 0, "share.version was upgraded to 2.\n", ""

    monkeypatch.setattr(upgrade, "run_tool", tool)
    value = {"params": {"action": "upgrade", "levels": {"share.version": 2}, "dry_run": False}}
    done = driver._features(value)
    assert used == [("4.4.0", "features")]
    assert done["tool"].startswith("kafka-features 4.4.0 ")
    assert done["output"] == "share.version was upgraded to 2."
    recorder.close()
