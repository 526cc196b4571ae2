"""Fault spans from effects (history/effects.py, checkers/scan/fault_windows.py, and the Freeze
spans of checkers/families/observer_samples.py): a history whose nemesis ops carry `effects` is
judged exactly as the same history without them (read through the one legacy derivation), a
package no checker has heard of is judged by the effects it recorded, and an effect no checker
knows never switches a check off silently."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.observer_samples import observe_samples_from_ops
from checkers.scan.fault_windows import TIME, fault_windows
from checkers.table_check import check_table
from history.columnar import op_rows, to_table
from history.effects import (
    DOWN,
    EFFECTS,
    RESTARTED,
    RESUMED,
    START,
    STOP,
    STOPPED,
    effect,
    legacy_effects,
)
from tests.unit.checkers.histories import H
from tests.unit.checkers.test_lease_liveness import OWED, Run, combined, dedicated, fence, liveness
from tests.unit.checkers.test_metadata import follower, leader

NAMES_OF = {"combined": combined, "dedicated": dedicated}


def with_effects(run: Run) -> Run:
    """The same run, each nemesis op's value carrying the effects the legacy reading derives."""
    names = [n["name"] for n in run.cluster["nodes"]]
    out = Run(**{k: v for k, v in vars(run).items() if k != "nemesis"})
    for at, f, inv, value in run.nemesis:
        effects = [e.to_json() for e in legacy_effects(f, value, names)]
        written = {**value, EFFECTS: effects} if isinstance(value, dict) else value
        out.nemesis.append((at, f, inv, written))
    return out


def outcome(run: Run) -> tuple[Any, ...]:
    r = liveness(run)
    return ([(f.kind, f.ops, f.explanation) for f in r.findings], r.notes, r.stats)


def spans(run: Run) -> list[tuple[Any, ...]]:
    names = [n["name"] for n in run.cluster["nodes"]]
    faults = fault_windows(run.rows(), names)
    return [
        (s.package, s.outer, s.held, s.nodes, s.cut, s.effects, s.kind) for s in faults.spans
    ] + [(o.index, nodes) for o, nodes in faults.others]


# -- new-style histories judged as old ones ---------------------------------------------------


def _fault(run: Run, draw: Any, at: float, until: float) -> None:
    nodes = [n["name"] for n in run.cluster["nodes"]]
    what = draw(st.sampled_from(["kill", "pause", "isolate", "packet", "clock", "jvm"]))
    node = draw(st.sampled_from(nodes))
    if what in ("kill", "pause", "isolate"):
        getattr(run, what)(node, at, until)
        return
    stall = draw(st.sampled_from(["controller-stall", "heartbeat-delay"]))
    kinds = {"packet": "loss", "clock": "bump", "jvm": stall}
    out: dict[str, Any] = {"kind": kinds[what], "targets": [node]}
    if what == "clock":
        out["restarted"] = draw(st.sampled_from([[], [node]]))
    run.fault(at, f"start-{what}", out)
    run.fault(until, f"stop-{what}", {"kind": kinds[what]})


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=st.sampled_from(sorted(NAMES_OF)))
def test_effects_written_give_the_same_spans_and_findings_as_the_legacy_reading(data, shape):
    run = Run(cluster=NAMES_OF[shape]())
    t = 2.0
    for _ in range(data.draw(st.integers(1, 3))):
        length = data.draw(st.floats(0.5, 12.0))
        _fault(run, data.draw, t, t + length)
        t += length + data.draw(st.floats(0.5, 4.0))
    brokers = [b for _, b in run.brokers]
    for _ in range(data.draw(st.integers(0, 2))):
        run.records.append(
            (data.draw(st.floats(1.0, 39.0)), fence(data.draw(st.sampled_from(brokers))))
        )
    run.records.sort(key=lambda r: r[0])
    new = with_effects(run)
    assert spans(new) == spans(run)
    assert outcome(new) == outcome(run)


def test_hand_written_cases_judge_the_same_with_effects():
    cases = [
        Run().kill("n3", 5.0, 15.0),
        Run().pause("n2", 5.0, 15.0),
        Run(cluster=dedicated()).isolate("b4", 5.0, 15.0),
        Run(epochs=[(0.0, 1, 3)]).isolate("n3", 5.0, 15.0),
    ]
    stall = Run()
    stall.fault(10.0, "start-jvm", {"kind": "controller-stall", "targets": ["n2"]})
    stall.fault(19.0, "stop-jvm", {"kind": "controller-stall"})
    stall.records.append((19.5, fence(2)))
    cases.append(stall)
    found = []
    for run in cases:
        assert outcome(with_effects(run)) == outcome(run)
        found += [f.kind for f in liveness(run).findings]
    # The isolated node that led its epoch obliges nothing, with effects or without.
    assert found == ["dead-broker-not-fenced"] * 3 + ["spurious-fence"]


# -- a package no checker knows ------------------------------------------------------------


def test_a_new_package_that_says_its_node_went_down_obliges_a_fence_like_a_kill():
    run = Run()
    down = {"effect": "down", "nodes": ["n3"], "done": ["n3"], "by": "OutOfMemoryError"}
    run.fault(5.0, "start-crash", {"kind": "oom", EFFECTS: [down]})
    run.fault(15.0, "stop-crash", {"kind": "oom"})
    (f,) = liveness(run).findings
    assert f.kind == "dead-broker-not-fenced"
    assert "broker 3 (node n3) was killed (OutOfMemoryError) by op" in f.explanation
    assert "start-crash" in f.explanation
    run.records.append((8.0, fence(3)))
    assert liveness(run).findings == []


def test_an_effect_no_checker_knows_excuses_and_leaves_unjudged_and_says_so():
    run = Run().kill("n3", 5.0, 15.0)
    run.fault(4.0, "start-disk", {"kind": "full", EFFECTS: [{"effect": "full", "nodes": ["n1"]}]})
    run.nemesis.sort(key=lambda x: x[0])
    result = liveness(run)
    assert result.findings == [] and result.stats["lease_obligations"] == 0
    (unjudged,) = [n for n in result.notes if "not judged" in n]
    assert "start-disk" in unjudged and "effects not known to this check: full" in unjudged
    (said,) = [n for n in result.notes if "does not know" in n]
    assert "1 fault(s) with effects this check does not know" in said and "start-disk" in said
    # A healthy broker's fence while it lasts, on its node or a controller's, is excused.
    run = Run()
    run.fault(16.0, "start-disk", {"kind": "full", EFFECTS: [{"effect": "full", "nodes": ["n1"]}]})
    run.fault(19.0, "stop-disk", {"kind": "full"})
    run.records.append((20.0, fence(2)))
    assert liveness(run).findings == []


def test_a_package_without_effects_no_reading_knows_is_taken_as_any_node_and_said():
    run = Run()
    run.fault(16.0, "start-disk", {"kind": "full"})
    run.fault(19.0, "stop-disk", {"kind": "full"})
    run.records.append((20.0, fence(2)))
    result = liveness(run)
    assert result.findings == []
    (said,) = [n for n in result.notes if "does not know" in n]
    assert "unknown (disk)" in said
    (span,) = fault_windows(run.rows(), ["n1", "n2", "n3"]).spans
    assert span.nodes is None and span.touches("n2")


def test_a_start_with_an_unknown_effect_may_undo_earlier_faults():
    # The kill holds until the disk fault's invocation: 1 s, far short of a fence's deadline.
    run = Run().kill("n3", 5.0, 15.0)
    run.fault(6.0, "start-disk", {"kind": "full", EFFECTS: [{"effect": "full", "nodes": ["n1"]}]})
    run.nemesis.sort(key=lambda x: x[0])
    (kill, _) = fault_windows(run.rows(), ["n1", "n2", "n3"]).spans
    assert kill.held is not None and kill.held[1] - kill.held[0] < OWED


def test_report_time_spans_are_the_same_spans():
    run = Run().kill("n3", 5.0, 15.0)
    rows = run.rows()
    for r in rows:
        r["time"] = int((r["wall"] - rows[0]["wall"]) * 1e9)
    (wall,) = fault_windows(rows, ["n3"]).spans
    (time,) = fault_windows(rows, ["n3"], clock=TIME).spans
    assert wall.effects == time.effects
    assert abs((wall.outer[1] - wall.outer[0]) - (time.outer[1] - time.outer[0])) < 1e-6
    json.dumps([e.to_json() for e in time.effects])


# -- Freeze spans (observer_samples.py) ------------------------------------------------------

NODES = ["n1", "n2", "n3"]


def freezes(h: H) -> list[tuple[Any, ...]]:
    rows = op_rows(to_table(h.history())).to_pylist()
    return [(f.index, f.nodes, f.start, f.end) for f in observe_samples_from_ops(rows).freezes]


def _nemesis_op(draw: Any) -> tuple[str, str, Any, Any]:
    """One nemesis op as (f, type, its value as written before `effects`, as written now)."""
    what = draw(st.sampled_from(["pause", "frozen", "unsure", "resume", "heal", "kill"]))
    some = st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True).map(sorted)
    if what == "pause":  # nemesis/process.py PauseNemesis.start
        aimed = draw(some)
        took = sorted(draw(st.sets(st.sampled_from(aimed))))
        old = {"kind": "one", "target": "one", "targets": aimed, "signal": "SIGSTOP",
               "stopped_after_s": {n: 0.1 for n in took}}  # fmt: skip
        if set(aimed) - set(took):
            old["not_running"] = sorted(set(aimed) - set(took))
        said = [effect(STOPPED, aimed, took, by="SIGSTOP")]
        return "start-pause", "ok", old, {**old, EFFECTS: said}
    if what == "frozen":  # a package from outside the registry (tests/integration), by name
        node = draw(st.sampled_from(NODES))
        old = {"kind": "one", "frozen": [node], "signal": "SIGSTOP"}
        return "start-pause", "ok", old, {**old, EFFECTS: [effect(STOPPED, [node], by="SIGSTOP")]}
    if what == "unsure":  # the value of a step that did not complete ok is the plan step
        f = draw(st.sampled_from(["start-pause", "stop-pause"]))
        return f, draw(st.sampled_from(["info", "fail"])), {"kind": "one"}, {"kind": "one"}
    if what == "resume":  # PauseNemesis.stop
        resumed = draw(st.lists(st.sampled_from(NODES), max_size=3, unique=True).map(sorted))
        old = {"kind": "one", "signal": "SIGCONT", "resumed": resumed}
        return "stop-pause", "ok", old, {**old, EFFECTS: [effect(RESUMED, resumed)]}
    if what == "heal":  # a heal by one package, or the run's one heal (which writes no effects)
        by = draw(st.sampled_from(["pause", "heal_cluster"]))
        done = draw(st.lists(st.sampled_from(NODES), max_size=3, unique=True).map(sorted))
        old = {"by": by, "actions": [f"{n}: sent SIGCONT to stopped JVM" for n in done]}
        new = {**old, EFFECTS: [effect(RESUMED, done)]} if by == "pause" else old
        return "heal", "ok", old, new
    node = draw(st.sampled_from(NODES))
    if draw(st.booleans()):
        old = {"kind": "one", "targets": [node], "signal": "SIGKILL", "exited_after_s": {node: 1}}
        return "start-kill", "ok", old, {**old, EFFECTS: [effect(DOWN, [node], [node])]}
    old = {"kind": "one", "restarted": [node]}
    return "stop-kill", "ok", old, {**old, EFFECTS: [effect(RESTARTED, [node])]}


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_written_effects_give_the_same_freezes_as_the_legacy_reading(data):
    old, new = H(), H()
    for node in NODES:  # the observer names every node
        old.observe(node)
        new.observe(node)
    starts = 0
    for _ in range(data.draw(st.integers(1, 8))):
        f, type_, before, now = _nemesis_op(data.draw)
        old.op("nemesis", f, {"kind": "one"}, type_, before)
        new.op("nemesis", f, {"kind": "one"}, type_, now)
        starts += f == "start-pause"
        node = data.draw(st.sampled_from(NODES))
        old.observe(node)
        new.observe(node)
    got = freezes(new)
    assert got == freezes(old) and len(got) == starts


def test_freezes_span_from_the_pause_to_the_first_resume_and_name_what_stopped():
    h = H().observe("n1").observe("n2")
    value = {"targets": ["n1", "n2"], "stopped_after_s": {"n2": 0.1}, "not_running": ["n1"]}
    h.nemesis("start-pause", value)  # invoked at 0.5 s, ok at 0.6 s (index 5)
    h.op("nemesis", "stop-pause", {"kind": "one"}, "fail", "docker unreachable")
    h.nemesis("heal", {"by": "heal_cluster", "actions": ["n2: sent SIGCONT to stopped JVM"]})
    h.nemesis("heal", {"by": "pause", "actions": ["sent SIGCONT to n2"]})  # ok at 1.2 s
    h.op("nemesis", "start-pause", {"kind": "one"}, "info", {"kind": "one"})  # any node
    assert freezes(h) == [(5, {"n2"}, 500_000_000, 1_200_000_000), (13, None, 1_300_000_000, None)]


def test_a_new_package_that_says_it_stopped_a_node_is_a_freeze():
    def deposed(stopped: str) -> H:
        """n1 leads epoch 5, is stopped by a package no checker knows by name while n2 leads
        epoch 6, then resumes still showing its old epoch for one sample (Kafka's gauges lag)."""
        h = H().observe("n1", **leader(5, node_id=1)).observe("n1", **leader(5, node_id=1))
        said = [effect(STOPPED, [stopped], by="cgroup freezer")]
        h.nemesis("start-freeze", {"kind": "cgroup", EFFECTS: said})
        for _ in range(20):
            h.observe("n2", **leader(6, node_id=2)).observe("n3", **follower(6, 2))
        h.nemesis("stop-freeze", {"kind": "cgroup", EFFECTS: [effect(RESUMED, [stopped])]})
        return h.observe("n1", **leader(5, node_id=1)).observe("n1", **follower(6, 2))

    h = deposed("n1")
    ((index, nodes, start, end),) = freezes(h)
    assert (index, nodes) == (5, {"n1"}) and start < end
    active = [f.kind for f in check_table(to_table(h.history()))]
    assert "multiple-active-controllers" not in active
    # The same fault on another node excuses nothing.
    active = [f.kind for f in check_table(to_table(deposed("n3").history()))]
    assert "multiple-active-controllers" in active


# -- held to it ------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
# Fault package names a checker might be tempted to test for ("partition" is also Kafka's).
PACKAGES = {"kill", "pause", "packet", "clock", "jvm"}


def test_no_checker_decides_by_a_fault_packages_name():
    said = []
    for path in sorted((ROOT / "checkers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if node.value in PACKAGES or node.value.startswith((START, STOP)):
                said.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert said == [], "read the op's effects (history/effects.py) instead"


# -- a choreography's stops (nemesis/choreo.py): each ends the faults on the nodes it names ----


def _choreographed(ends_only: bool) -> Run:
    """n1 paused from 2 s; at 10 s n3 paused and n1 resumed by a stop naming n1 alone; n3
    resumed at 20 s by a stop naming it."""
    run = Run()
    named = (lambda nodes: {"ends_only": nodes}) if ends_only else (lambda nodes: {})
    run.fault(2.0, "start-pause", {"targets": ["n1"], "stopped_after_s": {"n1": 0.05}})
    run.fault(10.0, "start-pause", {"targets": ["n3"], "stopped_after_s": {"n3": 0.05}})
    run.fault(10.2, "stop-pause", {"signal": "SIGCONT", "resumed": ["n1"], **named(["n1"])})
    run.fault(20.0, "stop-pause", {"signal": "SIGCONT", "resumed": ["n3"], **named(["n3"])})
    return run


def test_a_stop_that_names_its_nodes_ends_only_their_fault_spans():
    first, second = fault_windows(_choreographed(True).rows(), ["n1", "n2", "n3"]).spans
    assert first.nodes == {"n1"} and first.end is not None
    assert first.end.value["resumed"] == ["n1"]
    assert second.nodes == {"n3"} and second.end is not None
    assert second.end.value["resumed"] == ["n3"]
    assert second.outer[1] - second.outer[0] > 9.5
    # Read as every stop before it (each ends every fault of its package), n3's pause would
    # end at n1's resume, 0.2 s after it began, and nothing after that would be excused by it.
    _, cut_short = fault_windows(_choreographed(False).rows(), ["n1", "n2", "n3"]).spans
    assert cut_short.end is not None and cut_short.end.value["resumed"] == ["n1"]


def test_a_freeze_ends_at_the_resume_that_names_its_node():
    h = H().observe("n1").observe("n3")
    h.nemesis("start-pause", {"targets": ["n1"], "stopped_after_s": {"n1": 0.1}})
    h.nemesis("start-pause", {"targets": ["n3"], "stopped_after_s": {"n3": 0.1}})
    h.nemesis("stop-pause", {"resumed": ["n1"], "ends_only": ["n1"]})
    h.observe("n1")
    h.nemesis("stop-pause", {"resumed": ["n3"], "ends_only": ["n3"]})
    (a, b) = freezes(h)
    assert a[1] == {"n1"} and b[1] == {"n3"}
    assert a[3] < b[3], "the second pause lasts until its own resume"
