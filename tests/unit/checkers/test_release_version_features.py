"""What the feature-level rules make of KIP-1022's `upgrade --release-version` step (one operation
for every feature) and of `kraft.version` on a static quorum: hand-written histories, the real
4.0.2 and 4.3.1 answers (docs/upgrades.md) among them."""

from __future__ import annotations

from checkers.families.features import features_and_notes
from checkers.families.observer_samples import observe_samples_from_ops
from history.columnar import op_rows, to_table
from history.format import UPGRADE
from history.reader import parse_history
from tests.unit.checkers.test_features import GV, KV, MV, TV, Run

SUPPORTED = {MV: [7, 25], KV: [0, 1], GV: [0, 1], TV: [0, 2]}
AT_40 = {MV: 25, GV: 1, TV: 2}  # 4.0's levels: kraft.version at 0 is not listed
RELEASE_40 = {MV: 25, KV: 1, TV: 2, GV: 1}  # what `--release-version 4.0` sends


def _judge(run: Run):
    rows = op_rows(to_table(parse_history(run.jsonl(), "<rv>"))).to_pylist()
    upgrade = [r for r in rows if r["process"] == UPGRADE]
    return features_and_notes(observe_samples_from_ops(rows), upgrade)


def _cluster(run: Run, t: float, epoch: int, finalized, version: str) -> Run:
    for i, node in enumerate(("n1", "n2", "n3")):
        run.sample(
            node,
            t + 0.02 * i,
            epoch,
            finalized,
            supported=SUPPORTED,
            version=version,
            roles=("broker", "controller"),
        )
    return run


def test_kafka_4_0_acknowledging_kraft_version_on_a_static_quorum_is_a_note_not_a_loss():
    # Kafka 4.0.2, tried for real: every feature "was upgraded", kraft.version stays 0.
    run = _cluster(Run(), 1, 20, AT_40, "4.0.2")
    run.step(5, RELEASE_40, "ok", output="kraft.version was upgraded to 1.")
    for t in range(10, 20):
        _cluster(run, t, 30 + t, AT_40, "4.0.2")
    findings, notes = _judge(run)
    assert findings == []
    assert len(notes) == 1 and "kraft.version=1 on a static quorum" in notes[0]


def test_the_same_on_kafka_4_3_is_a_lost_update():
    # 4.1+ upgrades a static quorum's kraft.version: an acknowledgement that never shows is lost.
    run = _cluster(Run(), 1, 20, AT_40, "4.3.1")
    run.step(5, RELEASE_40, "ok")
    for t in range(10, 20):
        _cluster(run, t, 30 + t, AT_40, "4.3.1")
    findings, notes = _judge(run)
    assert [(f.kind, f.data["feature"]) for f in findings] == [("feature-update-lost", KV)]
    assert notes == []


def test_kafka_4_3_showing_kraft_version_1_after_the_step_is_healthy():
    run = _cluster(Run(), 1, 20, AT_40, "4.3.1")
    run.step(5, RELEASE_40, "ok")
    for t in range(10, 20):
        _cluster(run, t, 30 + t, {**AT_40, KV: 1}, "4.3.1")
    assert _judge(run) == ([], [])


def test_a_static_quorum_moving_to_kraft_version_1_before_4_1_is_found():
    run = _cluster(Run(), 1, 20, AT_40, "4.0.2")
    run.step(5, RELEASE_40, "ok")
    _cluster(run, 10, 40, {**AT_40, KV: 1}, "4.0.2")
    findings, _ = _judge(run)
    kinds = [f.kind for f in findings]
    assert kinds == ["static-quorum-kraft-version-changed"]
    assert "KIP-853" in findings[0].explanation and findings[0].ops


def test_a_dynamic_quorum_from_the_start_and_a_roll_to_4_1_are_not_judged():
    dynamic = _cluster(Run(), 1, 20, {**AT_40, KV: 1}, "4.0.2")
    _cluster(dynamic, 10, 40, {**AT_40, KV: 1}, "4.0.2")
    assert _judge(dynamic) == ([], [])
    # A 4.0 quorum rolled to 4.1 may be moved to kraft.version 1 from then on.
    rolled = _cluster(Run(), 1, 20, AT_40, "4.0.2")
    _cluster(rolled, 5, 30, AT_40, "4.1.2")
    rolled.step(8, {KV: 1}, "ok")
    _cluster(rolled, 12, 40, {**AT_40, KV: 1}, "4.1.2")
    assert _judge(rolled) == ([], [])


def test_a_refused_release_version_step_that_took_effect_is_found_for_its_features():
    # Kafka 4.0+ answers a request whole: a refusal of the release step changed nothing.
    run = _cluster(Run(), 1, 20, {MV: 22}, "4.0.2")
    run.step(5, {MV: 25, TV: 2, GV: 1}, "fail", error="Could not upgrade metadata.version")
    _cluster(run, 10, 40, {MV: 25, TV: 2, GV: 1}, "4.0.2")
    findings, _ = _judge(run)
    assert {f.kind for f in findings} == {"feature-refused-took-effect"}
    assert {f.data["feature"] for f in findings} == {MV, TV, GV}


def test_a_controller_sample_without_a_version_neither_pins_nor_unpins_the_quorum():
    # A real 4.0.2 run: one sample of a starting node named no release (JMX app-info absent).
    run = Run().sample("n1", 0.5, 20, AT_40, supported=SUPPORTED, version=None,
                       roles=("broker", "controller"))  # fmt: skip
    _cluster(run, 1, 20, AT_40, "4.0.2")
    run.step(5, RELEASE_40, "ok")
    for t in range(10, 20):
        _cluster(run, t, 30 + t, AT_40, "4.0.2")
    findings, notes = _judge(run)
    assert findings == [] and len(notes) == 1
