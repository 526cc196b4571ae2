"""history/effects.py: effect records as written and read back, and what an unreadable or
unknown one becomes (an effect nobody knows, on any node: never nothing)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from history.effects import (
    CUT,
    DOWN,
    EFFECTS,
    KNOWN,
    RESUMED,
    Effect,
    effect,
    legacy_effects,
    op_effects,
    started,
)

NODES = st.frozensets(st.sampled_from(["n1", "n2", "n3", "c1"]))


@given(
    name=st.sampled_from([*KNOWN, "full"]),
    nodes=st.none() | NODES,
    done=st.none() | NODES,
    links=st.none()
    | st.frozensets(st.frozensets(st.sampled_from(["n1", "n2", "n3"]), min_size=2, max_size=2)),
    side=st.sampled_from([None, "controller", "broker"]),
    by=st.sampled_from([None, "SIGKILL"]),
)
def test_a_record_reads_back_as_written(name, nodes, done, links, side, by):
    e = Effect(name, nodes, done, links, side, by)
    assert Effect.from_json(json.loads(json.dumps(e.to_json()))) == e
    assert e.known == (name in KNOWN)


def test_written_effects_are_read_and_the_legacy_reading_only_without_them():
    value = {"targets": ["n1"], "exited_after_s": {"n1": 0.1}, "signal": "SIGKILL"}
    (old,) = op_effects("start-kill", value, ["n1", "n2"])
    assert (old.effect, old.nodes, old.done, old.by) == (DOWN, {"n1"}, {"n1"}, "SIGKILL")
    written = {**value, EFFECTS: [effect(CUT, ["n1", "n2"], links=[["n1", "n2"]])]}
    (new,) = op_effects("start-kill", written, ["n1", "n2"])
    assert new.effect == CUT and new.links == {frozenset({"n1", "n2"})}
    assert op_effects("start-kill", {**value, EFFECTS: []}, ["n1"]) == ()


def test_unreadable_and_unknown_effects_stay_something():
    (bad,) = op_effects("start-x", {EFFECTS: ["down"]}, ["n1"])
    assert not bad.known and bad.nodes is None and bad.on("n1")
    (unknown,) = legacy_effects("start-disk", {"kind": "full", "targets": ["n2"]}, ["n1", "n2"])
    assert not unknown.known and unknown.nodes == {"n2"} and unknown.by == "disk"
    assert legacy_effects("heal", {"by": "heal_cluster", "actions": ["n1: x"]}, ["n1"]) == ()
    # A heal by one package (before the run's one heal) did what that package's stop does.
    healed = {"by": "pause", "actions": ["n1: sent SIGCONT to stopped JVM", "sent SIGCONT to n10"]}
    (resumed,) = legacy_effects("heal", healed, ["n1", "n10", "n2"])
    assert (resumed.effect, resumed.nodes) == (RESUMED, {"n1", "n10"})
    assert legacy_effects("heal", {"by": "pause"}, ["n1"]) == (Effect(RESUMED, frozenset()),)
    assert started("start-packet") == "packet" and started("stop-packet") is None
