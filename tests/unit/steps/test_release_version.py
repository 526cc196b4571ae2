"""KIP-1022's `kafka-features upgrade --release-version X`: as a `--features` item, as the way an
upgrade finalizes (`--finalize release-version`), the levels it sends (the tool's own
version-mapping), and how its answer becomes ok, fail or info."""

from __future__ import annotations

import pytest

from harness.plan import build_plan
from harness.run.recorder import Recorder
from harness.spec import SpecError, spec_from_dict
from history.reader import read_history
from steps.feature_steps import (
    RELEASE_VERSION,
    FeatureItem,
    FeatureSpecError,
    parse_features,
    parse_version_mapping,
    release_line,
)
from steps.upgrade import FEATURES, UpgradeDriver, UpgradeStep, release_outcome, upgrade_schedule

# Kafka 4.3.1's `kafka-features version-mapping --release-version 4.0`, as printed.
MAPPING_40 = """metadata.version=25 (4.0)
kraft.version=1
transaction.version=2
group.version=1
eligible.leader.replicas.version=0
share.version=0
streams.version=0
"""
LEVELS_40 = {"metadata.version": 25, "kraft.version": 1, "transaction.version": 2,
             "group.version": 1}  # fmt: skip
# Kafka 4.0.2's answer to `upgrade --release-version 4.0` on a static quorum (tried for real).
ANSWER_40 = """group.version was upgraded to 1.
kraft.version was upgraded to 1.
metadata.version was upgraded to 25.
transaction.version was upgraded to 2.
"""


def test_the_item_reads_as_one_release_step_and_is_an_upgrade():
    items = parse_features("release-version=4.0, dry-run:release-version=3.9", "4.1")
    assert items == [
        FeatureItem(RELEASE_VERSION, "4.0"),
        FeatureItem(RELEASE_VERSION, "3.9", dry_run=True),
    ]
    assert {i.action for i in items} == {"upgrade"}
    assert parse_features("release-version=4.1.2", "4.1") == [FeatureItem(RELEASE_VERSION, "4.1")]


@pytest.mark.parametrize(
    ("text", "version", "says"),
    [
        ("release-version=4.0", "3.9", "from Kafka 4.0 on (KIP-1022); the step runs on 3.9"),
        ("release-version=4.1", "4.0", "a release from 3.3"),
        ("release-version=3.2", "4.0", "a release from 3.3"),
        ("release-version=4.0!unsafe", "4.1", "cannot read"),
        ("release-version=x", "4.1", "cannot read"),
    ],
)
def test_what_the_tool_cannot_do_is_one_sentence(text, version, says):
    with pytest.raises(FeatureSpecError, match="features: ") as err:
        parse_features(text, version)
    assert says in str(err.value)


def test_the_finalize_option_replaces_the_per_feature_requests_and_is_stored_only_when_asked():
    steps = upgrade_schedule("kraft", 120, 5, "4.1", None, finalize=RELEASE_VERSION)
    feats = [s.params for s in steps if s.step == FEATURES]
    assert [(p["feature"], p["level"], p["dry_run"]) for p in feats] == [
        (RELEASE_VERSION, "4.1", True),
        (RELEASE_VERSION, "4.1", False),
    ]
    # The rolls are drawn as before: only what comes after them differs.
    before = upgrade_schedule("kraft", 120, 5, "4.1", None)
    assert [s for s in steps if s.step == "roll"] == [s for s in before if s.step == "roll"]
    plain = build_plan(spec_from_dict({"version": "4.0", "upgrade_to": "4.1"}), 5).to_dict()
    assert "finalize" not in plain["spec"]
    asked = spec_from_dict({"version": "4.0", "upgrade_to": "4.1", "finalize": RELEASE_VERSION})
    assert build_plan(asked, 5).to_dict()["spec"]["finalize"] == RELEASE_VERSION


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"version": "4.0"}, "give --upgrade-to"),
        ({"version": "3.8", "upgrade_to": "3.9"}, "from Kafka 4.0 on"),
        ({"topology": "zk", "version": "3.8", "upgrade_to": "3.9"}, "ZooKeeper mode"),
    ],
)
def test_the_finalize_option_is_refused_where_the_tool_has_no_release_version(spec, says):
    with pytest.raises(SpecError, match=says):
        spec_from_dict({**spec, "finalize": RELEASE_VERSION})


def test_a_release_line_is_its_major_and_minor():
    assert release_line("4.1.2") == "4.1" and release_line("4.0") == "4.0"


def test_the_version_mapping_is_read_line_by_line():
    assert parse_version_mapping(MAPPING_40)["metadata.version"] == 25
    assert parse_version_mapping(MAPPING_40)["share.version"] == 0
    assert parse_version_mapping("Unknown release version '9.9'.") == {}


def test_every_feature_acknowledged_is_ok_and_a_dry_run_needs_can_be():
    assert release_outcome(0, ANSWER_40, "", LEVELS_40, False)[0] == "ok"
    dry = ANSWER_40.replace("was", "can be")
    assert release_outcome(0, dry, "", LEVELS_40, True)[0] == "ok"
    assert release_outcome(0, dry, "", LEVELS_40, False)[0] == "info"
    # One feature's line missing: the answer does not say the whole request went through.
    partial = "\n".join(ANSWER_40.splitlines()[1:])
    assert release_outcome(0, partial, "", LEVELS_40, False)[0] == "info"


def test_a_refusal_of_every_feature_is_fail_and_anything_else_info():
    refused = "".join(
        f"Could not upgrade {f} to {lv}. Invalid update version {lv} for feature {f}. x\n"
        for f, lv in LEVELS_40.items()
    )
    assert release_outcome(1, refused, "4 out of 4 operation(s) failed.", LEVELS_40, False)[0] == (
        "fail"
    )
    timeout = "".join(
        f"Could not upgrade {f} to {lv}. Timed out waiting for a node assignment.\n"
        for f, lv in LEVELS_40.items()
    )
    assert release_outcome(1, timeout, "", LEVELS_40, False)[0] == "info"
    tool = "Can not specify `release-version` with other feature flags."
    assert release_outcome(1, "", tool, LEVELS_40, False)[0] == "fail"
    assert release_outcome(137, "", "", LEVELS_40, False)[0] == "info"


class _Spec:
    def __init__(self, name):
        self.name, self.is_zookeeper, self.is_broker = name, False, True


class _Node:
    def __init__(self, name):
        self.spec = _Spec(name)


class _Dist:
    version = "4.0.2"


class _Info:
    version, timing, cluster_id = "4.0", "fast", "x"

    class topology:
        @staticmethod
        def bootstrap_servers():
            return "10.0.0.1:9092"


def _drive(tmp_path, monkeypatch, answers):
    from steps import upgrade

    calls = []

    def tool(dist, name, args, timeout):
        calls.append(args[2:])
        return answers.pop(0)

    monkeypatch.setattr(upgrade, "run_tool", tool)
    step = UpgradeStep(
        0.0,
        FEATURES,
        "n1",
        {"action": "upgrade", "feature": RELEASE_VERSION, "level": "4.0", "dry_run": False},
    )
    nodes = {n: _Node(n) for n in ("n1", "n2")}
    rec = Recorder(tmp_path / "history.jsonl", "test")
    driver = UpgradeDriver([step], _Info(), {"4.0": _Dist()}, nodes, rec, step_timeout=1.0)  # type: ignore[arg-type]
    driver.start()
    driver._thread.join(10)
    driver.stop()
    rec.close()
    ops = read_history(tmp_path / "history.jsonl").ops
    return driver, calls, ops


def test_the_step_is_one_operation_naming_every_level_the_tool_sends(tmp_path, monkeypatch):
    driver, calls, ops = _drive(tmp_path, monkeypatch, [(0, MAPPING_40, ""), (0, ANSWER_40, "")])
    assert calls == [
        ["version-mapping", "--release-version", "4.0"],
        ["upgrade", "--release-version", "4.0"],
    ]
    invoke, done = ops
    # Features the release leaves at 0 are not sent (the tool upgrades nothing to 0).
    assert invoke["value"]["params"]["levels"] == LEVELS_40
    assert invoke["value"]["params"]["release_version"] == "4.0"
    assert done["type"] == "ok" and driver.completed()


def test_no_mapping_is_a_refusal_before_anything_is_sent(tmp_path, monkeypatch):
    answer = (1, "", "Unknown release version '4.0'.")
    _, calls, ops = _drive(tmp_path, monkeypatch, [answer])
    assert len(calls) == 1 and ops[-1]["type"] == "fail"
    assert "no version mapping for release 4.0" in ops[-1]["error"]


def test_kraft_version_refused_with_a_voter_cut_off_refuses_the_whole_request():
    # Kafka 4.4.0's dry run of --release-version 4.4 while one voter was cut off (a real run,
    # docs/upgrades.md): every feature refused because kraft.version could not be verified.
    levels = {"metadata.version": 33, "kraft.version": 1, "share.version": 2}
    why = (
        "The update failed for all features since the following feature had an error: Invalid "
        "upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it"
    )
    out = "".join(f"Can not upgrade {f} to {lv}. {why}\n" for f, lv in levels.items())
    assert release_outcome(1, out, "3 out of 3 operation(s) failed.", levels, True)[0] == "fail"
