"""KIP-996's pre-vote under the five-voter one-way layout (checkers/families/prevote.py), on
hand-written controller samples and fault ops: a stable leader raises nothing, an epoch rise
while the leader was reachable from a majority is `leadership-unstable` (on 4.0+, a note on
3.9), a leader nobody reaches may be replaced, a leaderless stretch past the bound is
`election-livelock`, and another fault ends what is judged."""

from __future__ import annotations

import json
from typing import Any

from checkers.families.observer_samples import Sample
from checkers.families.prevote import BOUND_NS, check_prevote, reachable

SEC = 1_000_000_000
NAMES = ["n1", "n2", "n3", "n4", "n5"]
LAYOUT = {"n1": ["n2", "n4", "n5"], "n2": ["n1", "n3", "n5"], "n3": ["n2"], "n4": ["n1"],
          "n5": ["n1", "n2"]}  # fmt: skip


def op_pair(index: int, f: str, t: float, value: Any, took: float = 0.05) -> list[dict]:
    rows = []
    for i, (kind, at) in enumerate((("invoke", t), ("ok", t + took))):
        rows.append({"index": index + i, "invoke_index": None if kind == "invoke" else index,
                     "type": kind, "f": f, "process": "nemesis", "node": None,
                     "time": round(at * SEC), "wall": 1e9 + at,
                     "value_json": json.dumps(value)})  # fmt: skip
    return rows


def layout_ops(start: float, stop: float | None, index: int = 1000) -> list[dict]:
    value = {
        "kind": "one-way-layout",
        "one_way": LAYOUT,
        "effects": [{"effect": "degraded", "nodes": NAMES, "by": "iptables one-way"}],
    }
    rows = op_pair(index, "start-partition", start, value)
    if stop is not None:
        rows += op_pair(index + 2, "stop-partition", stop, {"kind": "one-way-layout"})
    return rows


class Views:
    """Controller samples: every node every 0.5 s, each saying (state, leader, epoch)."""

    def __init__(self, version: str = "4.0.2") -> None:
        self.samples: list[Sample] = []
        self.version = version

    def round(self, t: float, states: dict[str, tuple[str | None, int | None]]) -> Views:
        for i, node in enumerate(NAMES):
            state, epoch = states.get(node, ("follower", None))
            raft = None if epoch is None else {"state": state, "epoch": epoch, "leader": None}
            at = round((t + 0.02 * i) * SEC)
            value = {"roles": ["broker", "controller"], "raft": raft, "version": self.version}
            self.samples.append(Sample(len(self.samples) * 2 + 1, node, at, at + SEC // 100, value))
        return self

    def steady(self, t0: float, t1: float, leader: str, epoch: int) -> Views:
        t = t0
        while t < t1:
            self.round(t, {n: ("leader" if n == leader else "follower", epoch) for n in NAMES})
            t += 0.5
        return self


def kinds(result) -> list[str]:
    return sorted(f.kind for f in result.findings)


def test_the_layout_leaves_voters_2_3_and_4_reachable_from_a_majority():
    assert [v for v in NAMES if reachable(LAYOUT, v)] == ["n3", "n4", "n5"]


def test_a_leader_that_keeps_its_epoch_under_the_layout_raises_nothing():
    views = Views().steady(0, 40, "n3", 5)
    result = check_prevote(views.samples, layout_ops(10, 30), NAMES)
    assert result.findings == [] and result.checked
    assert "0 rises while the leader was reachable" in result.notes[0]


def test_an_epoch_rise_while_the_leader_was_reachable_is_unstable_on_4_0():
    views = Views().steady(0, 15, "n3", 5)
    views.round(15, {"n2": ("candidate", 6), "n3": ("leader", 5)})
    views.steady(15.5, 40, "n4", 6)
    result = check_prevote(views.samples, layout_ops(10, 30), NAMES)
    assert kinds(result) == ["leadership-unstable"]
    f = result.findings[0]
    assert f.data["leader"] == "n3" and f.data["epoch"] == 5 and "KIP-996" in f.explanation


def test_the_same_on_3_9_is_a_note_there_is_no_pre_vote():
    views = Views("3.9.2").steady(0, 15, "n3", 5)
    views.round(15, {"n2": ("candidate", 6), "n3": ("leader", 5)})
    views.steady(15.5, 40, "n4", 6)
    result = check_prevote(views.samples, layout_ops(10, 30), NAMES)
    assert result.findings == []
    assert "1 rises" in result.notes[0] and "no pre-vote: not judged" in result.notes[0]


def test_a_leader_nobody_reaches_may_be_replaced_but_not_its_reachable_successor():
    views = Views().steady(0, 12, "n1", 5)  # n1 cannot be reached by a majority
    views.steady(12, 20, "n4", 6)
    ok = check_prevote(views.samples, layout_ops(10, 30), NAMES)
    assert ok.findings == []
    views.steady(20, 30, "n5", 7)  # n4 was reachable: this rise is not
    assert kinds(check_prevote(views.samples, layout_ops(10, 30), NAMES)) == ["leadership-unstable"]


def test_no_leader_past_the_bound_while_every_controller_answers_is_a_livelock():
    views = Views().steady(0, 10, "n3", 5)
    t, epoch = 10.0, 6
    while t < 10 + BOUND_NS / SEC + 3:
        views.round(t, {n: ("prospective", 5) for n in NAMES})
        t += 0.5
    result = check_prevote(views.samples, layout_ops(10, 40), NAMES)
    assert kinds(result) == ["election-livelock"]
    # A controller whose view is unknown in the gap may have led: not judged.
    blind = Views().steady(0, 10, "n3", 5)
    t = 10.0
    while t < 10 + BOUND_NS / SEC + 3:
        blind.round(t, {**{n: ("prospective", 5) for n in NAMES}, "n4": (None, None)})
        t += 0.5
    assert check_prevote(blind.samples, layout_ops(10, 40), NAMES).findings == []
    assert epoch == 6


def test_another_fault_ends_what_is_judged_and_one_in_place_at_the_start_skips_it():
    views = Views().steady(0, 20, "n3", 5)
    views.steady(20, 40, "n4", 6)  # after a kill of n3 at 18 s: not judged
    kill = {
        "kind": "one",
        "targets": ["n3"],
        "effects": [{"effect": "down", "nodes": ["n3"], "done": ["n3"], "by": "SIGKILL"}],
    }
    rows = layout_ops(10, 30) + op_pair(2000, "start-kill", 18, kill)
    assert check_prevote(views.samples, rows, NAMES).findings == []
    early = op_pair(2000, "start-kill", 5, kill) + layout_ops(10, 30)
    result = check_prevote(views.samples, early, NAMES)
    assert result.findings == [] and "began under another fault" in result.notes[0]


def test_a_run_without_the_layout_is_not_judged_and_says_nothing():
    views = Views().steady(0, 10, "n3", 5).steady(10, 20, "n4", 6)
    result = check_prevote(views.samples, [], NAMES)
    assert result == type(result)([], [], False)
