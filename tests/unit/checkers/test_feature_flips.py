"""The feature-level rules (checkers/families/features.py) on the user's own feature steps
(--features): a flip of transaction.version down and back up while the observer lags behind it is no
finding, the same flip with a level no step explains is; a lossy unsafe metadata.version downgrade,
which every release up to 4.3 refuses, must leave the level as it was, and an unsafe downgrade
of another feature, which Kafka treats as any downgrade, is judged as one."""

from __future__ import annotations

from checkers.families.feature_views import NO, YES, steps_of
from history.columnar import op_rows, to_table
from history.format import UPGRADE
from history.reader import parse_history
from tests.unit.checkers.test_features import MV, TV, Run, kinds, sample_index

SUPPORTED_41 = {MV: [7, 27], TV: [0, 2], "group.version": [0, 1], "kraft.version": [0, 1]}
V41 = {"supported": SUPPORTED_41, "version": "4.1.2"}
UNSAFE_REFUSAL = (
    "Could not downgrade metadata.version to 26. Invalid metadata.version 26. Unsafe metadata "
    "downgrade is not supported in this version."
)


def at(run: Run, t: float, epoch: int, tv: int, nodes=("b1", "b2", "c1")) -> Run:
    for i, node in enumerate(nodes):
        roles = ("controller",) if node.startswith("c") else ("broker",)
        run.sample(node, t + i * 0.02, epoch, {MV: 27, TV: tv}, roles=roles, **V41)
    return run


def steady(run: Run, start: float, until: float, epoch: int, tv: int) -> int:
    t = start
    while t < until:
        at(run, t, epoch, tv)
        epoch += 2
        t += 0.5
    return epoch


def flip(lagging: bool = True) -> Run:
    """transaction.version 2 -> 0 -> 2 on 4.1, every step acknowledged."""
    r = Run()
    steady(r, 0, 5, 10, 2)
    r.step(5, {TV: 0}, action="downgrade", output="transaction.version was downgraded to 0.")
    # b1 has the downgrade; b2 lags at an epoch from before it (a broker applies the log when
    # it gets to it); the controller's epoch is the downgrade record's offset.
    r.sample("b1", 6, 40, {MV: 27, TV: 0}, **V41)
    if lagging:
        r.sample("b2", 6.2, 30, {MV: 27, TV: 2}, **V41)
    r.sample("c1", 6.3, 39, {MV: 27, TV: 0}, roles=("controller",), **V41)
    r.step(8, {TV: 2}, output="transaction.version was upgraded to 2.")
    # Sampled while the upgrade was being answered: b2 first caught up to the downgrade only.
    r.sample("b2", 8.2, 45, {MV: 27, TV: 0}, **V41)
    steady(r, 9, 20, 60, 2)
    return r


def test_a_flip_down_and_back_up_with_lagging_samples_is_no_finding():
    assert flip().findings() == [] and flip(lagging=False).findings() == []


def test_the_flip_back_before_the_upgrade_was_asked_for_is_a_lost_downgrade():
    r = Run()
    steady(r, 0, 5, 10, 2)
    r.step(5, {TV: 0}, action="downgrade")
    r.sample("b1", 6, 40, {MV: 27, TV: 0}, **V41)
    r.sample("b2", 7, 50, {MV: 27, TV: 2}, **V41)  # a later epoch, and no step asked for 2 yet
    r.step(8, {TV: 2})
    steady(r, 9, 20, 60, 2)
    (f,) = r.findings()
    assert f.kind == "feature-update-lost"
    assert sample_index(r, "b1", 6) in f.ops and sample_index(r, "b2", 7) in f.ops
    assert "transaction.version=0 at kraft epoch 40" in f.explanation
    assert "transaction.version=2 at the later epoch 50" in f.explanation


def test_a_refused_flip_back_that_took_effect_is_reported():
    r = Run()
    steady(r, 0, 5, 10, 2)
    r.step(5, {TV: 0}, action="downgrade")
    steady(r, 6, 8, 40, 0)
    err = "Could not upgrade transaction.version to 2. Invalid update version 2 ..."
    r.step(8, {TV: 2}, "fail", error=err)
    steady(r, 9, 12, 60, 2)
    assert "feature-refused-took-effect" in kinds(r)


def test_an_unsafe_metadata_downgrade_is_refused_and_leaves_the_level():
    r = Run()
    steady(r, 0, 5, 10, 2)
    r.step(5, {MV: 26}, "fail", action="downgrade", unsafe=True, error=UNSAFE_REFUSAL)
    steady(r, 6, 20, 40, 2)
    assert r.findings() == []
    (step,) = steps_of(_rows(r))
    assert step.unsafe and step.applied(MV) == NO
    assert step.describe() == "downgrade --unsafe metadata.version=26"


def test_an_unsafe_metadata_downgrade_that_took_effect_names_the_flag():
    r = Run()
    steady(r, 0, 5, 10, 2)
    r.step(5, {MV: 26}, "fail", action="downgrade", unsafe=True, error=UNSAFE_REFUSAL)
    r.sample("b1", 6, 40, {MV: 26, TV: 2}, **V41)
    (f,) = r.findings()
    assert f.kind == "feature-refused-took-effect"
    assert "downgrade --unsafe metadata.version=26" in f.explanation
    assert "Unsafe metadata downgrade is not supported" in f.explanation


def test_an_acknowledged_unsafe_downgrade_of_another_feature_is_judged_as_a_downgrade():
    r = Run()
    steady(r, 0, 5, 10, 2)
    r.step(5, {TV: 0}, action="downgrade", unsafe=True)
    steady(r, 6, 20, 40, 0)
    assert r.findings() == []
    (step,) = steps_of(_rows(r))
    assert step.applied(TV) == YES
    lost = Run()
    steady(lost, 0, 5, 10, 2)
    lost.step(5, {TV: 0}, action="downgrade", unsafe=True)
    steady(lost, 6, 20, 40, 2)  # never shown, everything settled
    assert kinds(lost) == ["feature-update-lost"]


def _rows(r: Run) -> list[dict]:
    rows = op_rows(to_table(parse_history(r.jsonl(), "<flips>"))).to_pylist()
    return [row for row in rows if row["process"] == UPGRADE]
