"""Coverage counts (checkers/families/coverage/, the table checkers/core/states.py): each state
counted from its evidence, and listed as not measured where the run lacks it."""

from __future__ import annotations

import json

from checkers.api import check
from checkers.core.states import BY_NAME, STATES
from checkers.families.coverage.count import count_states, is_fencing_error
from tests.unit.checkers.test_liveness import (
    NODES,
    T0,
    Ops,
    _group_rows,
    _partition,
    _record,
    _registered,
)


def test_every_state_is_named_once_and_documented():
    assert len(BY_NAME) == len(STATES)
    docs = (__import__("pathlib").Path(__file__).parents[3] / "docs" / "checkers.md").read_text()
    assert [s.name for s in STATES if f"`{s.name}`" not in docs] == []


def test_faults_and_client_outcomes_are_counted_from_the_history():
    h = Ops().op(0, "send", 0).op(1, "send", 1, type_="info").op(2, "txn", 2, type_="fail")
    h.kill(["n1"], 3, 5).isolate("n2", 6, 8)
    c = count_states(h.rows(), NODES, h.type_ops(), 2, None, None, T0)
    assert c.states["node-killed"] == 1 and c.states["links-cut"] == 1
    assert c.states["op-indeterminate"] == 1 and c.states["txn-aborted"] == 1
    assert c.states["producer-fenced"] == 2
    assert set(c.unmeasured) >= {"redelivery", "leader-elected", "controller-failover"}
    assert is_fencing_error("ProducerFencedException: ...") and not is_fencing_error("timeout")


def test_client_faults_are_counted_as_client_states_not_as_node_ones():
    h = Ops().op(0, "send", 0)
    for at, (effect, extra) in enumerate(
        [
            ("stopped", {}),
            ("down", {}),
            ("stalled", {"side": "client"}),
            ("cut", {"links": []}),
            ("fenced", {}),
        ]
    ):
        one = {"effect": effect, "nodes": [], **extra, "by": "slot 1's client"}
        h.fault("start-client", 2 + 2 * at, {"slot": 1, "effects": [one]})
        h.fault("stop-client", 3 + 2 * at, {"effects": []})
    c = count_states(h.rows(), NODES, h.type_ops(), 0, None, None, T0)
    assert {s: c.states[s] for s in ("client-stopped", "client-held", "client-cut")} == {
        "client-stopped": 2,
        "client-held": 1,
        "client-cut": 1,
    }
    assert c.states["client-fenced"] == 1
    node_states = ("node-killed", "node-paused", "links-cut", "jvm-stalled")
    assert [c.states[s] for s in node_states] == [0, 0, 0, 0]


def test_elections_with_sends_in_flight_and_rebalances():
    records = _registered(30)
    records.append(_record(500, 0.5, "TOPIC_RECORD", name="q", topicId="T"))
    records.append(_record(501, 0.6, "PARTITION_RECORD", topicId="T", partitionId=0,
                           replicas=[1, 2, 3], isr=[1, 2], leader=1, leaderEpoch=0))  # fmt: skip
    records.sort(key=lambda r: (r.create_ms, r.offset))
    _partition(records, 5.0, leader=2)  # while the send below is in flight
    _partition(records, 20.0, leader=1)  # with nothing in flight
    h = Ops().op(0, "send", 4.0, took=2.0).op(0, "send", 10.0)
    c = count_states(h.rows(), NODES, h.type_ops(), 0, _group_rows([3.0], 10), records, T0)
    assert c.states["leader-elected"] == 2
    assert c.states["leader-change-with-sends-in-flight"] == 1
    assert "partitions-revoked" in c.states and c.states["redelivery"] == 0


def test_results_json_holds_the_coverage_block(tmp_path):
    h = Ops().sends(0, 5).kill(["n2"], 2, 3)
    check(h.write(tmp_path / "r"))
    block = json.loads((tmp_path / "r" / "results.json").read_text())["coverage"]
    assert block["states"]["node-killed"] == 1 and "node-killed" in block["reached"]
    assert "COVERAGE: reached" in (tmp_path / "r" / "summary.txt").read_text()


def test_analyze_sums_hangs_and_reached_states_per_scenario(tmp_path):
    from checkers.analyze.report import _coverage
    from checkers.analyze.runs import RunInfo

    def run(name: str, liveness: str, coverage: dict[str, int]) -> RunInfo:
        return RunInfo(tmp_path / name, "queue", "kill", "3.9.2", None, "valid",
                       scenario="queue / kill", liveness=liveness, coverage=coverage)  # fmt: skip

    page = _coverage([run("a", "hang", {"node-killed": 2}), run("b", "live", {"node-killed": 0})])
    assert "liveness hang" in page and "node-killed" in page
    assert "<td>queue / kill</td>" in page and "<td>2</td>" in page  # two runs
    assert "No run" in _coverage([run("c", "", {})])


def test_a_run_missing_a_required_state_did_not_exercise_its_scenario(tmp_path):
    h = Ops().sends(0, 5).kill(["n2"], 2, 3)
    v = check(h.write(tmp_path / "r", {"must_reach": "node-killed,broker-fenced"}), write=False)
    assert v.coverage["missing"] == ["broker-fenced"] and v.coverage["exercised"] is False
    assert any("did not exercise its scenario" in n for n in v.notes)
    assert "NOT EXERCISED, missing broker-fenced" in v.summary()
    assert v.status != "invalid"  # coverage judges nothing
