"""Liveness verdicts (checkers/families/liveness/): hand-written histories that violate each rule,
their neighbours that do not, and hypothesis-generated valid histories that must stay live.

Times: the history's clock starts at 0 and its wall clock at T0; a client op is an invocation and
a completion 0.1 s apart unless said otherwise. The cluster is three combined nodes at fast
timing (3 s sessions): the no-progress bound is 34 s, a disrupted node's allowance 23 s.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.core.verdict import liveness_line
from checkers.families.liveness import bounds as liveness_bounds
from checkers.families.liveness.assignment import unassigned_groups
from checkers.families.liveness.bounds import Bounds
from checkers.families.liveness.check import TOLERATED, LivenessInputs, check_liveness
from checkers.families.liveness.fatal import fatal_findings, fatal_lines
from checkers.families.liveness.health import Roles, Stretch, disruptions, healthy_now, stretches
from checkers.families.liveness.offline import offline_partitions
from checkers.families.liveness.progress import TypeOps, no_progress, stalls
from checkers.families.liveness.registration import after_heal, with_log_evidence
from checkers.families.metadata_log.liveness import Nodes, Sample
from checkers.families.metadata_log.parse import Record
from checkers.scan.fault_windows import TIME, WALL, fault_windows

T0 = 1_795_500_000.0
NODES = ("n1", "n2", "n3")
CLUSTER: dict[str, Any] = {
    "timing": "fast",
    "nodes": [{"name": n, "roles": ["broker", "controller"], "node_id": i + 1}
              for i, n in enumerate(NODES)],
}  # fmt: skip
BOUNDS = Bounds.of(CLUSTER)
ROLES = Roles.of(CLUSTER)


class Ops:
    """A history with explicit times (seconds): client ops and nemesis ops."""

    def __init__(self) -> None:
        self.ops: list[tuple[float, dict[str, Any]]] = []

    def op(
        self,
        process: Any,
        f: str,
        at: float,
        took: float = 0.1,
        type_: str = "ok",
        value: Any = None,
    ) -> Ops:
        self.n = getattr(self, "n", 0) + 1
        out = value
        if value is None and f == "send":
            value = [["send", 0, self.n]]
            out = [["send", 0, [self.n, self.n]]] if type_ == "ok" else value
        elif value is None:
            value = out = [[f]]
        self.ops.append((at, {"type": "invoke", "f": f, "process": process, "value": value}))
        done = {"type": type_, "f": f, "process": process, "value": out}
        self.ops.append((at + took, done))
        return self

    def sends(self, start: float, end: float, every: float = 0.5, type_: str = "ok") -> Ops:
        t, p = start, 0
        while t < end:
            self.op(p % 4, "send", t, 0.1, type_)
            t += every
            p += 1
        return self

    def fault(self, f: str, at: float, value: dict[str, Any], took: float = 0.2) -> Ops:
        self.ops.append((at, {"type": "invoke", "f": f, "process": "nemesis", "value": {}}))
        self.ops.append((at + took, {"type": "ok", "f": f, "process": "nemesis", "value": value}))
        return self

    def kill(self, nodes: list[str], at: float, until: float) -> Ops:
        effects = [{"effect": "down", "nodes": nodes, "done": nodes, "by": "SIGKILL"}]
        self.fault("start-kill", at, {"targets": nodes, "effects": effects})
        restarted = [{"effect": "restarted", "nodes": nodes}]
        return self.fault("stop-kill", until, {"restarted": nodes, "effects": restarted})

    def isolate(self, node: str, at: float, until: float) -> Ops:
        links = [[node, o] for o in NODES if o != node]
        effects = [{"effect": "cut", "nodes": list(NODES), "links": links, "by": "iptables"}]
        self.fault("start-partition", at, {"kind": "isolate-one", "effects": effects})
        return self.fault("stop-partition", until, {"healed": list(NODES)})

    def heal(self, at: float) -> Ops:
        return self.fault("heal", at, {"by": "heal_cluster"})

    def lines(self) -> list[dict[str, Any]]:
        out = []
        open_: dict[Any, int] = {}
        for i, (t, op) in enumerate(sorted(self.ops, key=lambda x: x[0])):
            line = {**op, "index": i, "time": int(t * 1e9), "wall": T0 + t}
            out.append(line)
            if op["type"] == "invoke":
                open_[op["process"]] = i
        return out

    def rows(self) -> list[dict[str, Any]]:
        """Op rows as the checkers read them (invoke_index, value_json)."""
        rows, opened = [], {}
        for line in self.lines():
            inv = None
            if line["type"] == "invoke":
                opened[line["process"]] = line["index"]
            else:
                inv = opened.pop(line["process"])
            rows.append({**line, "process": str(line["process"]), "invoke_index": inv,
                         "value_json": json.dumps(line["value"])})  # fmt: skip
        return rows

    def type_ops(self) -> dict[str, TypeOps]:
        by_f: dict[str, list[tuple[float, float, bool, int, int]]] = {}
        opened: dict[Any, tuple[int, float]] = {}
        for line in self.lines():
            if not isinstance(line["process"], int):
                continue
            if line["type"] == "invoke":
                opened[line["process"]] = (line["index"], line["time"] / 1e9)
                continue
            i, t = opened.pop(line["process"])
            by_f.setdefault(line["f"], []).append(
                (
                    t,
                    line["time"] / 1e9,
                    line["type"] == "ok",
                    i,
                    line["index"],
                    line["type"] == "fail",
                )
            )
        return {
            f: TypeOps(f, *(np.array(col) for col in zip(*sorted(xs), strict=True)))
            for f, xs in by_f.items()
        }

    def write(self, d: Path, spec: dict[str, Any] | None = None) -> Path:
        d.mkdir(parents=True, exist_ok=True)
        header = {"kchaos_history": 1, "started_wall": T0, "run": "t/1"}
        text = "\n".join(json.dumps(x) for x in [header, *self.lines()]) + "\n"
        (d / "history.jsonl").write_text(text)
        (d / "cluster.json").write_text(json.dumps(CLUSTER))
        if spec is not None:
            (d / "plan.json").write_text(json.dumps({"kchaos_plan": 1, "spec": spec}))
        return d


def _spans(h: Ops, until: float) -> list[Stretch]:
    faults = fault_windows(h.rows(), NODES, TIME)
    return stretches(disruptions(faults, ROLES, BOUNDS.recovery_s), ROLES, 0.0, until)


def _progress(h: Ops, until: float) -> list[Any]:
    return no_progress(h.type_ops(), _spans(h, until), BOUNDS.progress_s, BOUNDS.says())


# -- no-progress -----------------------------------------------------------------------------


def test_sends_stuck_while_every_node_is_healthy_is_no_progress():
    h = Ops().sends(0, 5).sends(5, 60, every=2.0, type_="info")
    found = _progress(h, 60)
    assert [f.kind for f in found] == ["no-progress"]
    assert found[0].data["f"] == "send"
    assert "34 s bound" in found[0].explanation


def test_one_node_isolated_is_still_a_healthy_majority():
    h = Ops().sends(0, 5).isolate("n1", 6, 55).sends(5, 60, every=2.0, type_="info")
    assert [f.kind for f in _progress(h, 60)] == ["no-progress"]


def test_a_majority_killed_excuses_the_stall_and_its_recovery():
    h = Ops().sends(0, 5).kill(["n1", "n2"], 5, 30).sends(5, 52, every=2.0, type_="info")
    h.sends(52, 60)
    # 30 s + the 23 s allowance: the majority is healthy again only from 53 s.
    assert _progress(h, 60) == []


def test_a_stall_no_longer_than_the_bound_is_not_a_finding():
    h = Ops().sends(0, 5).sends(5, 38, every=2.0, type_="info").sends(38.5, 45)
    assert _progress(h, 45) == []


def test_a_type_asked_rarely_is_not_stuck_between_asks():
    h = Ops().op(0, "poll", 0).op(0, "poll", 50).op(0, "poll", 100)
    assert _progress(h, 100) == []


def test_a_stall_starts_at_the_first_op_in_flight_after_the_last_ok():
    h = Ops().op(0, "send", 0).op(1, "send", 40, took=40.0, type_="info").op(2, "send", 81)
    [stall] = stalls(h.type_ops()["send"], 34.0)
    assert stall.start == 40.0 and stall.asked == 2


def test_writes_need_enough_brokers_for_min_insync():
    roles = Roles.of(CLUSTER, {"durability": {"replication": 2, "min_insync_replicas": 2}})
    reads, writes = healthy_now(roles, frozenset({"n3"}), frozenset())
    assert reads and not writes
    assert healthy_now(ROLES, frozenset({"n3"}), frozenset()) == (True, True)
    assert healthy_now(ROLES, frozenset({"n2", "n3"}), frozenset()) == (False, False)
    cut = frozenset({frozenset({"n1", "n2"}), frozenset({"n1", "n3"}), frozenset({"n2", "n3"})})
    assert healthy_now(ROLES, frozenset(), cut) == (False, False)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.floats(0.05, 30.0), min_size=1, max_size=40),
    faults=st.lists(
        st.tuples(st.sampled_from(["kill", "isolate"]), st.floats(0, 200), st.floats(1, 40),
                  st.sampled_from([["n1"], ["n2"], ["n1", "n3"], list(NODES)])),
        max_size=4,
    ),
)  # fmt: skip
def test_valid_histories_stay_live(gaps, faults):
    """Progress within the bound between any two oks (whatever the faults): never a finding;
    and stalls of any length while a majority is down, plus its allowance: never a finding."""
    h, t = Ops(), 0.0
    for g in gaps:
        h.op(0, "send", t, took=min(0.1, g / 2))
        t += g
    cursor = 0.0  # the nemesis does one thing at a time
    for kind, at, span, nodes in faults:
        at = max(at, cursor)
        cursor = at + span + 1.0
        if kind == "kill":
            h.kill(nodes, at, at + span)
        else:
            h.isolate(nodes[0], at, at + span)
    assert _progress(h, t + 1) == []


@settings(max_examples=40, deadline=None)
@given(start=st.floats(1, 50), down=st.floats(1, 60), stuck=st.floats(0, 200))
def test_stalls_under_a_majority_down_are_never_findings(start, down, stuck):
    end = start + down
    h = Ops().op(0, "send", 0).kill(["n1", "n2"], start, end)
    # Stuck from before the kill until the majority has had its allowance after it.
    h.op(1, "send", start, took=end + BOUNDS.recovery_s - start + min(stuck, 20), type_="info")
    assert _progress(h, end + 300) == []


# -- the verdict's liveness block, end to end ------------------------------------------------


def test_a_hang_is_reported_tolerated_by_default_and_fails_with_the_option(tmp_path):
    h = Ops().sends(0, 5).op(9, "poll", 0).sends(5, 60, every=2.0, type_="info")
    reported = check(h.write(tmp_path / "report", {"seed": 1}))
    assert reported.liveness is not None and reported.liveness["status"] == "hang"
    [f] = [f for f in reported.findings if f.kind == "no-progress"]
    # The sends were never read back (unseen): the safety verdict is unknown, never invalid.
    assert f.tolerated == TOLERATED and reported.status == "unknown"
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["liveness"]["counts"] == {"no-progress": 1}
    assert "LIVENESS: HANG" in (tmp_path / "report" / "summary.txt").read_text()
    failed = check(h.write(tmp_path / "fail", {"liveness": "fail"}))
    assert failed.status == "invalid" and failed.liveness["fails_run"] is True
    assert [f.kind for f in failed.failures] == ["no-progress"]


def test_a_healthy_run_is_live_with_its_recovery_time(tmp_path):
    h = Ops().sends(0, 5).kill(["n2"], 5, 10).heal(12).sends(12.5, 20)
    v = check(h.write(tmp_path / "r"), write=False)
    assert v.liveness["status"] == "live" and v.status != "invalid"
    send = v.liveness["recovery"]["by_type"]["send"]
    assert send["seconds"] < 1.0 and send["after_s"] > 12.0
    assert "recovery after the last heal the clients saw: send" in liveness_line(v.liveness)


def test_recovery_is_measured_from_the_last_heal_the_clients_saw(tmp_path):
    # The final heal comes after the clients stopped: sends are measured from the kill's stop.
    h = Ops().sends(0, 5).kill(["n2"], 5, 8).sends(9.5, 20).heal(25)
    v = check(h.write(tmp_path / "r"), write=False)
    send = v.liveness["recovery"]["by_type"]["send"]
    assert 8.0 < send["after_s"] < 9.0 and 1.0 < send["seconds"] < 2.0
    assert v.liveness["recovery"]["last_heal_s"] > 25.0


def test_a_recovery_beyond_the_run_bound_is_slow_recovery(tmp_path):
    h = Ops().sends(0, 5).heal(5).op(0, "send", 5.5, took=8.0, type_="info").sends(14, 16)
    v = check(h.write(tmp_path / "r", {"recovery_bound": 5}), write=False)
    assert [f.kind for f in v.findings if f.kind == "slow-recovery"] == ["slow-recovery"]


# -- after the heal: brokers and controllers -------------------------------------------------


def _record(offset: int, at: float, type_: str, **data: Any) -> Record:
    text = json.dumps({"type": type_, "version": 0, "data": data})
    return Record("n1", offset + 1, offset, 1, int((T0 + at) * 1000), text, False)


def _samples(node: str, start: float, end: float, started_ms: int) -> list[Sample]:
    value = {"broker_state": "RUNNING", "started_ms": started_ms}
    return [Sample(i, node, T0 + t, T0 + t + 0.1, "ok", value)
            for i, t in enumerate(np.arange(start, end, 1.0))]  # fmt: skip


def _registered(until: float) -> list[Record]:
    out = []
    for b in (1, 2, 3):
        out.append(_record(len(out), 0.1, "REGISTER_BROKER_RECORD", brokerId=b, fenced=True))
        out.append(_record(len(out), 0.2, "BROKER_REGISTRATION_CHANGE_RECORD", brokerId=b,
                           fenced=-1))  # fmt: skip
        out.append(_record(len(out), 0.3, "REGISTER_CONTROLLER_RECORD", controllerId=b))
    t = 1.0
    while t < until:
        out.append(_record(len(out), t, "NO_OP_RECORD"))
        t += 0.5
    return out


def test_a_broker_still_fenced_long_after_the_heal_is_a_finding():
    records = _registered(80)
    records.insert(9, _record(9, 5.0, "BROKER_REGISTRATION_CHANGE_RECORD", brokerId=2, fenced=1))
    records.sort(key=lambda r: r.create_ms)
    samples = _samples("n2", 0, 80, int(T0 * 1000) - 1000)
    found = after_heal(records, Nodes.of(CLUSTER), samples, T0 + 10, T0 + 80, 35.0, False)
    assert [f.kind for f in found.findings] == ["broker-fenced-after-heal"]
    # Its JVM never answered after the bound: not judged, and said.
    quiet = after_heal(records, Nodes.of(CLUSTER), [], T0 + 10, T0 + 80, 35.0, False)
    assert quiet.findings == [] and "not judged" in quiet.notes[0]
    # Unfenced again after the heal: nothing.
    records.append(_record(999, 20.0, "BROKER_REGISTRATION_CHANGE_RECORD", brokerId=2, fenced=-1))
    records.sort(key=lambda r: r.create_ms)
    ok = after_heal(records, Nodes.of(CLUSTER), samples, T0 + 10, T0 + 80, 35.0, False)
    assert ok.findings == []


def test_a_restarted_controller_that_never_registers_again_is_a_finding():
    records = _registered(80)
    started = int((T0 + 12) * 1000)  # n3's JVM restarted at 12 s and no registration followed
    samples = _samples("n3", 13, 80, started) + _samples("n1", 0, 80, int(T0 * 1000) - 1)
    samples += _samples("n2", 0, 80, int(T0 * 1000) - 1)
    found = after_heal(records, Nodes.of(CLUSTER), samples, T0 + 12, T0 + 80, 35.0, False)
    assert [f.kind for f in found.findings] == ["controller-unregistered"]
    records.append(_record(999, 15.0, "REGISTER_CONTROLLER_RECORD", controllerId=3))
    records.sort(key=lambda r: r.create_ms)
    again = after_heal(records, Nodes.of(CLUSTER), samples, T0 + 12, T0 + 80, 35.0, False)
    assert again.findings == []
    steps = after_heal(records[:-1], Nodes.of(CLUSTER), samples, T0 + 12, T0 + 80, 35.0, True)
    assert steps.findings == []


def test_an_unregistered_controller_quotes_its_own_registration_timeout(tmp_path):
    """KAFKA-20247, as a 3.9.2 controller logged it in the example campaign: the request timed
    out, and the manager never tried again. Only a line of this incarnation is quoted."""
    records = _registered(80)
    started = int((T0 + 12) * 1000)
    samples = _samples("n3", 13, 80, started) + _samples("n1", 0, 80, int(T0 * 1000) - 1)
    samples += _samples("n2", 0, 80, int(T0 * 1000) - 1)
    [f] = after_heal(records, Nodes.of(CLUSTER), samples, T0 + 12, T0 + 80, 35.0, False).findings
    log = tmp_path / "logs" / "n3" / "stdout.log"
    log.parent.mkdir(parents=True)

    def stamp(at: float) -> str:
        return datetime.fromtimestamp(T0 + at, UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]

    timed_out = (
        "ERROR [ControllerRegistrationManager id=3 incarnation=A] RegistrationResponseHandler: "
        "channel manager timed out before sending the request. "
        "(kafka.server.ControllerRegistrationManager)"
    )
    log.write_text(f"[{stamp(5)}] {timed_out}\n[{stamp(6)}] INFO other\n")
    assert with_log_evidence([f], tmp_path) == [f]  # before this JVM started: not its cause
    log.write_text(log.read_text() + f"[{stamp(19)}] {timed_out}\n")
    [quoted] = with_log_evidence([f], tmp_path)
    assert "The controller's log, logs/n3/stdout.log:3: " in quoted.explanation
    assert "KAFKA-20247" in quoted.explanation and quoted.data["log"][1] == 3
    assert with_log_evidence([f], None) == [f]


def test_a_broker_absent_from_a_log_that_begins_after_a_snapshot_is_not_judged():
    records = [r for r in _registered(80) if 'brokerId": 2' not in r.text][3:]
    samples = _samples("n2", 0, 80, int(T0 * 1000) - 1000)
    r = after_heal(records, Nodes.of(CLUSTER), samples, T0 + 10, T0 + 80, 35.0, False)
    assert r.findings == [] and any("snapshot" in n for n in r.notes)


def test_after_the_heal_is_not_judged_when_the_log_ends_within_the_bound():
    r = after_heal(_registered(30), Nodes.of(CLUSTER), [], T0 + 10, T0 + 30, 35.0, False)
    assert not r.judged and r.findings == [] and "within the 35 s bound" in r.notes[0]


# -- leaderless partitions -------------------------------------------------------------------


def _partition(records: list[Record], at: float, **data: Any) -> None:
    records.append(_record(len(records) + 1000, at, "PARTITION_CHANGE_RECORD",
                           topicId="T", partitionId=0, **data))  # fmt: skip
    records.sort(key=lambda r: (r.create_ms, r.offset))


def test_a_partition_leaderless_with_a_live_isr_member_is_a_finding():
    records = _registered(60)
    records.append(_record(500, 0.5, "TOPIC_RECORD", name="q", topicId="T"))
    records.append(_record(501, 0.6, "PARTITION_RECORD", topicId="T", partitionId=0,
                           replicas=[1, 2, 3], isr=[1, 2], leader=1, leaderEpoch=0))  # fmt: skip
    records.sort(key=lambda r: (r.create_ms, r.offset))
    _partition(records, 5.0, leader=-1, isr=[2])
    found, seen = offline_partitions(records, T0 + 60, 26.0)
    assert [f.kind for f in found] == ["partition-offline-live-isr"] and seen == 1
    assert "q-0" in found[0].explanation
    # The same, but broker 2 fenced too: Kafka has no one to elect.
    fenced = [*records, _record(900, 5.0, "BROKER_REGISTRATION_CHANGE_RECORD", brokerId=2,
                                 fenced=1)]  # fmt: skip
    fenced.sort(key=lambda r: (r.create_ms, r.offset))
    assert offline_partitions(fenced, T0 + 60, 26.0)[0] == []
    # Elected within the bound: nothing.
    _partition(records, 8.0, leader=2)
    assert offline_partitions(records, T0 + 60, 26.0)[0] == []


# -- consumer groups -------------------------------------------------------------------------


def _group_rows(events_at: list[float], until: float) -> list[dict[str, Any]]:
    h = Ops().op(0, "subscribe", 0.0, value=[0, 1])
    t = 1.0
    while t < until:
        h.op(0, "poll", t, value=[["poll", {}]])
        t += 1.0
    rows = h.rows()
    for at in events_at:
        row = next(
            r for r in rows if r["f"] == "poll" and r["type"] == "ok" and r["time"] / 1e9 > at
        )
        row["fields_json"] = json.dumps({"rebalance": [["assigned", [0, 1], row["time"] - 1]]})
    return rows


def test_a_group_that_never_holds_a_partition_is_a_finding():
    spans = [Stretch(0.0, 100.0, True)]
    found, judged = unassigned_groups(_group_rows([], 100), spans, BOUNDS.group_s)
    assert not judged  # no rebalance events at all: nothing to judge by
    rows = _group_rows([70.0], 100)
    found, judged = unassigned_groups(rows, spans, BOUNDS.group_s)
    assert judged and [f.kind for f in found] == ["group-unassigned"]
    found, _ = unassigned_groups(_group_rows([3.0], 100), spans, BOUNDS.group_s)
    assert found == []


# -- fatal log lines -------------------------------------------------------------------------

STAMP = "[2026-11-28 11:20:40,212]"


def _log(run: Path, node: str, lines: list[str]) -> None:
    (run / "logs" / node).mkdir(parents=True)
    (run / "logs" / node / "stdout.log").write_text("\n".join(lines) + "\n")


def test_fatal_lines_are_findings_unless_a_fault_explains_them(tmp_path):
    fatal = (
        f"{STAMP} ERROR Encountered fatal fault: caught exception (ProcessTerminatingFaultHandler)"
    )
    _log(
        tmp_path, "n1", [f"{STAMP} INFO fine", fatal, "java.io.UncheckedIOException: quorum-state"]
    )
    _log(tmp_path, "n2", [f"{STAMP} ERROR Exiting Kafka due to fatal exception (kafka.Kafka$)",
                          "java.lang.IllegalStateException: boom"])  # fmt: skip
    lines = fatal_lines(tmp_path, list(NODES))
    assert [(x.node, x.line) for x in lines] == [("n1", 2), ("n2", 1)]
    wall = lines[0].wall
    none = fault_windows([], NODES, WALL)
    found, _ = fatal_findings(lines, none)
    assert [f.kind for f in found] == ["fatal-log-line"] * 2 and "quorum-state" in found[
        0
    ].explanation
    # A fault on n1 before the line: its storage error is allowed; n2's is not (no fault there).
    h = Ops().kill(["n1"], 0, 1)
    rows = [{**r, "wall": wall - 100 + r["wall"] - T0} for r in h.rows()]
    found, notes = fatal_findings(lines, fault_windows(rows, NODES, WALL))
    assert [f.data["node"] for f in found] == ["n2"] and "storage" in notes[0]


# -- the whole, and the held constants -------------------------------------------------------


def test_nothing_to_judge_is_not_judged():
    r = check_liveness(LivenessInputs(CLUSTER, {}, [], {}))
    assert r.block["status"] == "not judged" and r.findings == []


def test_the_client_timeout_copy_is_the_workloads():
    from workloads import admin, java_client, pipelined, queue

    longest = max(
        queue.TXN_TIMEOUT_S,
        queue.SEND_TIMEOUT_S,
        java_client.TXN_TIMEOUT_S,
        java_client.SEND_TIMEOUT_S,
        pipelined.SEND_TIMEOUT_S,
        admin.REQUEST_TIMEOUT_S,
    )
    assert longest == liveness_bounds.CLIENT_OP_TIMEOUT_S
