"""Lease liveness (checkers/families/metadata_log/liveness.py): a killed, paused or cut-off broker
is fenced within the session timeout + allowance while a living controller leads, and a healthy
broker is not fenced; fencing attempts that never committed are notes.

Each case is a hand-written run directory: a history with wall clocks (nemesis ops, observer
samples every second), decoded metadata logs with NoOpRecords every 500 ms, cluster.json (fast
timing: 3 s sessions, so a fence is owed 5 s after the later of the fault and the epoch start),
and sometimes plan.json and a controller's stdout.log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.core.findings import Finding
from checkers.families.metadata_log.committed import committed_log, majority_bound
from checkers.families.metadata_log.liveness import (
    ALLOWANCE_MS,
    SPURIOUS_TOLERATED,
    LivenessInput,
    lease_liveness,
)
from checkers.families.metadata_log.parse import parse_metadata_log
from tests.unit.checkers.metalogs import BATCH, RECORD, rec

T0 = 1_795_500_000.0  # the wall clock at history time 0
TIMEOUT_MS = 3000  # timing "fast"
OWED = (TIMEOUT_MS + ALLOWANCE_MS) / 1000
STARTED_MS = int(T0 * 1000) - 60_000  # every JVM started a minute before the history


def combined() -> dict[str, Any]:
    nodes = [{"name": f"n{i}", "roles": ["broker", "controller"], "node_id": i} for i in (1, 2, 3)]
    return {"timing": "fast", "nodes": nodes}


def dedicated() -> dict[str, Any]:
    nodes = [{"name": f"c{i}", "roles": ["controller"], "node_id": i} for i in (1, 2, 3)]
    nodes += [{"name": f"b{i}", "roles": ["broker"], "node_id": i} for i in (4, 5, 6)]
    return {"timing": "fast", "nodes": nodes}


def fence(broker: int, epoch: int = 10) -> dict[str, Any]:
    return rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=broker, brokerEpoch=epoch, fenced=1)


def shutting_down(broker: int, epoch: int = 10) -> dict[str, Any]:
    return rec(
        "BROKER_REGISTRATION_CHANGE_RECORD",
        brokerId=broker,
        brokerEpoch=epoch,
        inControlledShutdown=1,
    )


@dataclass
class Run:
    """A run to be written: ops, metadata log entries, and who is down when."""

    cluster: dict[str, Any] = field(default_factory=combined)
    until: float = 40.0
    epochs: list[tuple[float, int, int]] = field(default_factory=lambda: [(0.0, 1, 1)])
    silent: list[tuple[float, float]] = field(default_factory=list)  # no leader appends
    records: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    nemesis: list[tuple[float, str, Any, Any]] = field(default_factory=list)
    down: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # samples fail
    broker_state: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)
    plan: dict[str, Any] | None = None

    @property
    def brokers(self) -> list[tuple[str, int]]:
        return [(n["name"], n["node_id"]) for n in self.cluster["nodes"] if "broker" in n["roles"]]

    def fault(self, at: float, f: str, out: Any, inv: Any = None) -> Run:
        self.nemesis.append((at, f, inv if inv is not None else {"at_s": at}, out))
        return self

    def kill(self, node: str, at: float, until: float) -> Run:
        self.fault(at, "start-kill", {"targets": [node], "exited_after_s": {node: 0.01}})
        self.down.setdefault(node, []).append((at, until + 1))
        return self.fault(until, "stop-kill", {"restarted": [node]})

    def pause(self, node: str, at: float, until: float) -> Run:
        self.fault(at, "start-pause", {"targets": [node], "stopped_after_s": {node: 0.05}})
        self.down.setdefault(node, []).append((at, until + 0.3))
        return self.fault(until, "stop-pause", {"signal": "SIGCONT", "resumed": [node]})

    def isolate(self, node: str, at: float, until: float) -> Run:
        names = [n["name"] for n in self.cluster["nodes"]]
        grudge = {n: [node] if n != node else [o for o in names if o != node] for n in names}
        self.fault(at, "start-partition", {"kind": "isolate-one", "grudge": grudge})
        return self.fault(until, "stop-partition", {"healed": names})

    # -- the files ----------------------------------------------------------------------

    def epoch_at(self, t: float) -> tuple[int, int]:
        current = self.epochs[0]
        for e in self.epochs:
            if e[0] <= t:
                current = e
        return current[1], current[2]

    def entries(self) -> list[tuple[float, int, dict[str, Any] | str]]:
        out: list[tuple[float, int, dict[str, Any] | str]] = []
        for i, (start, epoch, _) in enumerate(self.epochs):
            end = self.epochs[i + 1][0] if i + 1 < len(self.epochs) else self.until
            out.append((start, epoch, "LEADER_CHANGE(2)"))
            t = start + 0.5
            while t < end:
                if not any(a <= t < b for a, b in self.silent):
                    out.append((t, epoch, rec("NO_OP_RECORD")))
                t += 0.5
        for _, broker in self.brokers:
            reg = rec("REGISTER_BROKER_RECORD", brokerId=broker, brokerEpoch=10, fenced=True)
            out.append((0.1, 1, reg))
            out.append((0.2, 1, rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=broker,
                                    brokerEpoch=10, fenced=-1)))  # fmt: skip
        out += [(t, self.epoch_at(t)[0], body) for t, body in self.records]
        return sorted(out, key=lambda e: e[0])

    def dump(self, extra: list[tuple[float, int, dict[str, Any]]] = ()) -> str:
        lines = [
            "Dumping /x/__cluster_metadata-0/00000000000000000000.log",
            "Log starting offset: 0",
        ]
        for o, (t, epoch, body) in enumerate([*self.entries(), *extra]):
            ms = round((T0 + t) * 1000)
            control = isinstance(body, str)
            text = f"controlType: {body}" if control else "payload: " + json.dumps(body)
            lines.append(BATCH.format(o=o, e=epoch, c=str(control).lower(), t=ms))
            lines.append(RECORD.format(o=o, t=ms, body=text))
        return "\n".join(lines) + "\n"

    def controllers(self) -> list[str]:
        return [n["name"] for n in self.cluster["nodes"] if "controller" in n["roles"]]

    def logs(self, tail: dict[str, list[tuple[float, int, dict[str, Any]]]] | None = None):
        return {
            n: parse_metadata_log(self.dump((tail or {}).get(n, [])), n) for n in self.controllers()
        }

    def ops(self) -> list[dict[str, Any]]:
        """History lines (no index yet), in time order; each process one op at a time."""
        ops: list[tuple[float, dict[str, Any]]] = []

        def op(process: str, f: str, at: float, took: float, inv: Any, out: Any, **kw: Any):
            type_ = kw.pop("type_", "ok")
            ops.append((at, {"type": "invoke", "f": f, "process": process, "value": inv, **kw}))
            done = {"type": type_, "f": f, "process": process, "value": out, **kw}
            ops.append((at + took, done))

        for at, f, inv, out in self.nemesis:
            op("nemesis", f, at, 0.2, inv, out, node=None)
        names = [n["name"] for n in self.cluster["nodes"]]
        t = 0.5
        while t < self.until:
            for k, name in enumerate(names):
                at = t + 0.1 * k
                if any(a <= at <= b for a, b in self.down.get(name, [])):
                    op("observer", "observe", at, 0.05, None, None, node=name, type_="info")
                    continue
                epoch, leader = self.epoch_at(at)
                state = next(
                    (s for a, b, s in self.broker_state.get(name, []) if a <= at <= b), "RUNNING"
                )
                value = {"raft": {"state": "follower", "leader": leader, "epoch": epoch},
                         "broker_state": state, "started_ms": STARTED_MS}  # fmt: skip
                op("observer", "observe", at, 0.05, None, value, node=name)
            t += 1.0
        ops.sort(key=lambda x: x[0])
        return [{**line, "time": int(at * 1e9), "wall": T0 + at} for at, line in ops]

    def rows(self) -> list[dict[str, Any]]:
        """The same as op rows (checkers' columnar form)."""
        out, open_ = [], {}
        for i, line in enumerate(self.ops()):
            inv = open_.pop(line["process"], None) if line["type"] != "invoke" else None
            if line["type"] == "invoke":
                open_[line["process"]] = i
            out.append(
                {"index": i, "invoke_index": inv, "type": line["type"], "f": line["f"],
                 "process": line["process"], "wall": line["wall"], "node": line.get("node"),
                 "value_json": json.dumps(line["value"]) if line["value"] is not None else None}
            )  # fmt: skip
        return out

    def write(self, d: Path, tail: dict[str, list[tuple[float, int, dict[str, Any]]]] = ()) -> Path:
        (d / "metadata").mkdir(parents=True)
        for n in self.controllers():
            (d / "metadata" / f"{n}.txt").write_text(self.dump(dict(tail).get(n, [])))
        (d / "cluster.json").write_text(json.dumps(self.cluster))
        if self.plan is not None:
            (d / "plan.json").write_text(json.dumps(self.plan))
        header = {"kchaos_history": 1, "run": "test", "started_wall": T0}
        lines = [header] + [{"index": i, **op} for i, op in enumerate(self.ops())]
        (d / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        return d


def liveness(run: Run, **given: Any):
    logs = run.logs()
    committed = committed_log(logs, majority_bound(logs, len(logs)))
    return lease_liveness(committed, logs, run.cluster, LivenessInput(run.rows(), **given), 3000)


def kinds(findings: list[Finding]) -> list[str]:
    return sorted(
        f.kind for f in findings if f.kind in ("dead-broker-not-fenced", "spurious-fence")
    )


# -- dead-broker-not-fenced ----------------------------------------------------------------


def test_a_killed_broker_fenced_in_time_is_silent_and_counted(tmp_path):
    run = Run().kill("n3", 5.0, 15.0)
    run.records.append((7.9, fence(3)))  # 2.7 s after the kill's ok: the last heartbeat before it
    v = check(run.write(tmp_path), write=False)
    assert kinds(v.findings) == []
    assert v.stats["lease_obligations"] == 1 and v.stats["lease_obligations_met"] == 1
    assert v.status == "valid"


def test_a_killed_broker_never_fenced_is_a_finding_citing_ops_and_records(tmp_path):
    run = Run().kill("n3", 5.0, 15.0)
    v = check(run.write(tmp_path), write=False)
    (f,) = [f for f in v.findings if f.kind == "dead-broker-not-fenced"]
    assert v.status == "invalid" and f.tolerated is None
    ops = run.ops()
    start_kill = [i for i, o in enumerate(ops) if o["f"] == "start-kill"]
    stop_kill = [i for i, o in enumerate(ops) if o["f"] == "stop-kill"]
    assert set(f.ops) == {*start_kill, *stop_kill}
    assert "broker 3 (node n3) was killed (SIGKILL)" in f.explanation
    assert "no committed record fenced or unregistered broker 3" in f.explanation
    assert f"{ALLOWANCE_MS / 1000:g} s allowance" in f.explanation
    assert "KIP-631" in f.explanation and "unable to renew" in f.explanation
    # The epoch's first and last committed records, and the record that unfenced the broker.
    assert f.data["records"][0].endswith("epoch 1: LEADER_CHANGE(2)")
    assert "NO_OP_RECORD" in f.data["records"][1]
    assert '"fenced": -1' in f.data["records"][2]
    assert f.data["deadline"] == round(T0 + 5.2 + OWED, 3)
    assert v.stats["lease_obligations"] == 1 and v.stats["lease_obligations_met"] == 0


def test_a_fence_after_the_deadline_is_still_a_finding_saying_when():
    run = Run().kill("n3", 5.0, 15.0)
    run.records.append((13.0, fence(3)))
    (f,) = liveness(run).findings
    assert "the first committed record to change it after that" in f.explanation


def test_a_fault_shorter_than_timeout_and_allowance_obliges_nothing():
    run = Run().kill("n3", 5.0, 5.2 + OWED - 0.1)
    result = liveness(run)
    assert result.findings == [] and result.stats["lease_obligations"] == 0


def test_no_leader_while_every_controller_is_down_obliges_nothing():
    run = Run(epochs=[(0.0, 1, 1), (16.0, 2, 2)], silent=[(5.0, 16.0)])
    run.fault(5.0, "start-kill", {"targets": ["n1", "n2", "n3"],
                                  "exited_after_s": {"n1": 0.0, "n2": 0.0, "n3": 0.0}})  # fmt: skip
    run.fault(15.0, "stop-kill", {"restarted": ["n1", "n2", "n3"]})
    result = liveness(run)
    assert result.findings == [] and result.stats["lease_obligations"] == 0


def test_a_broker_already_shut_down_before_the_fault_is_not_obliged():
    run = Run().kill("n3", 5.0, 15.0)
    run.records += [(3.0, shutting_down(3)), (3.5, fence(3))]
    result = liveness(run)
    assert result.findings == [] and result.stats["lease_obligations"] == 0


def test_a_new_leader_grants_a_fresh_lease_so_the_clock_starts_at_its_epoch():
    # The killed node led: the next epoch begins 2.5 s later; the fence 3.5 s after that is in
    # time, where it would be late counted from the kill.
    run = Run(epochs=[(0.0, 1, 3), (7.7, 2, 1)]).kill("n3", 5.0, 15.0)
    run.records.append((11.2, fence(3)))
    result = liveness(run)
    assert result.findings == [] and result.stats["lease_obligations_met"] == 1
    run.records.clear()
    (f,) = liveness(run).findings
    assert "epoch 2 began at" in f.explanation and "fresh lease" in f.explanation


def test_a_paused_broker_is_obliged_like_a_killed_one():
    run = Run().pause("n2", 5.0, 15.0)
    (f,) = liveness(run).findings
    assert f.kind == "dead-broker-not-fenced" and "paused (SIGSTOP)" in f.explanation
    run.records.append((8.0, fence(2)))
    assert liveness(run).findings == []


def test_a_broker_cut_off_from_every_controller_by_a_partition():
    run = Run(cluster=dedicated(), epochs=[(0.0, 1, 1)]).isolate("b4", 5.0, 15.0)
    (f,) = liveness(run).findings
    assert "cut off from every other controller by a partition" in f.explanation
    run.records.append((8.0, fence(4)))
    result = liveness(run)
    assert result.findings == [] and result.stats["lease_obligations_met"] == 1


def test_a_partitioned_combined_node_that_led_the_epoch_obliges_nothing():
    # n3 isolated while it led (the samples say leader 3): its own epoch's records prove no
    # other controller lived, and a cut-off leader fences nobody it cannot reach.
    run = Run(epochs=[(0.0, 1, 3)]).isolate("n3", 5.0, 15.0)
    assert liveness(run).stats["lease_obligations"] == 0
    run = Run(epochs=[(0.0, 1, 1)]).isolate("n3", 5.0, 15.0)
    assert kinds(liveness(run).findings) == ["dead-broker-not-fenced"]


def test_a_stalled_leader_restarts_the_clock_when_it_appends_again():
    # The leader is silent 6-9 s (paused itself, say): the clock starts again at 9.5.
    run = Run(silent=[(6.0, 9.5)]).kill("n3", 5.0, 15.5)
    run.records.append((13.5, fence(3)))
    assert liveness(run).findings == []


def test_a_packet_fault_on_a_controller_leaves_the_obligation_unjudged():
    run = Run().kill("n3", 5.0, 15.0)
    run.fault(4.0, "start-packet", {"kind": "loss", "targets": ["n1"], "percent": 50})
    run.nemesis.sort(key=lambda x: x[0])
    result = liveness(run)
    assert result.stats["lease_obligations"] == 0 and result.findings == []
    (note,) = [n for n in result.notes if "not judged" in n]
    assert "broker 3 killed (SIGKILL)" in note and "packet fault op" in note


# -- spurious-fence --------------------------------------------------------------------------


def test_a_healthy_running_broker_fenced_is_a_tolerated_finding(tmp_path):
    run = Run()
    run.records.append((20.0, fence(2)))
    v = check(run.write(tmp_path), write=False)
    (f,) = [f for f in v.findings if f.kind == "spurious-fence"]
    assert f.tolerated == SPURIOUS_TOLERATED and v.status == "valid"
    assert "broker 2 (node n2) was fenced by a committed record" in f.explanation
    assert "broker_state RUNNING" in f.explanation and "KIP-631" in f.explanation
    assert f.ops and all(run.ops()[i]["node"] == "n2" for i in f.ops)
    assert v.stats["lease_fences_judged"] == 1


def test_with_availability_fail_the_spurious_fence_fails_the_run(tmp_path):
    run = Run(plan={"spec": {"availability": "fail"}})
    run.records.append((20.0, fence(2)))
    v = check(run.write(tmp_path), write=False)
    (f,) = [f for f in v.findings if f.kind == "spurious-fence"]
    assert f.tolerated is None and v.status == "invalid"


def test_a_fault_on_the_brokers_node_excuses_the_fence():
    run = Run().kill("n2", 16.0, 19.0)
    run.records.append((20.0, fence(2)))
    assert kinds(liveness(run).findings) == []


def test_a_partition_of_the_brokers_links_excuses_the_fence():
    run = Run(cluster=dedicated())
    run.isolate("c1", 15.0, 18.0)  # c1 is cut off from b5 too
    run.records.append((20.0, fence(5)))
    assert kinds(liveness(run).findings) == []
    run = Run(cluster=dedicated())
    run.isolate("b6", 15.0, 18.0)  # not b5's links: no excuse
    run.records.append((20.0, fence(5)))
    assert kinds(liveness(run).findings) == ["spurious-fence"]


def test_a_jvm_fault_on_a_controller_does_not_excuse_but_one_on_the_broker_does():
    run = Run(cluster=dedicated())
    run.fault(16.0, "start-jvm", {"kind": "controller-stall", "targets": ["c1"]})
    run.fault(19.0, "stop-jvm", {"kind": "controller-stall"})
    run.records.append((20.0, fence(5)))
    assert kinds(liveness(run).findings) == ["spurious-fence"]
    run = Run(cluster=dedicated())
    run.fault(16.0, "start-jvm", {"kind": "heartbeat-delay", "targets": ["b5"]})
    run.fault(19.0, "stop-jvm", {"kind": "heartbeat-delay"})
    run.records.append((20.0, fence(5)))
    assert kinds(liveness(run).findings) == []


def test_a_controller_stall_on_the_brokers_own_combined_node_does_not_excuse_its_fence():
    # As on a real 3.9.2 run: the stalled active controller, once its queue ran again, fenced
    # the broker beside it on its own node, whose heartbeats had been sent all along.
    run = Run()
    run.fault(10.0, "start-jvm", {"kind": "controller-stall", "targets": ["n2"]})
    run.fault(19.0, "stop-jvm", {"kind": "controller-stall"})
    run.records.append((19.5, fence(2)))
    (f,) = liveness(run).findings
    assert f.kind == "spurious-fence"
    assert "a controller-stall of n2" in f.explanation and "own threads" in f.explanation
    ops = run.ops()
    stall = next(i for i, op in enumerate(ops) if op["f"] == "start-jvm" and op["type"] == "ok")
    assert stall in f.ops
    # The broker's own heartbeats delayed on that node excuse it.
    run = Run()
    run.fault(10.0, "start-jvm", {"kind": "heartbeat-delay", "targets": ["n2"]})
    run.fault(19.0, "stop-jvm", {"kind": "heartbeat-delay"})
    run.records.append((19.5, fence(2)))
    assert kinds(liveness(run).findings) == []


def test_a_controlled_shutdown_is_no_spurious_fence():
    run = Run()
    run.records += [(19.5, shutting_down(2)), (20.0, fence(2))]
    assert kinds(liveness(run).findings) == []


def test_a_broker_not_running_or_not_answering_is_no_spurious_fence():
    run = Run(broker_state={"n2": [(17.0, 18.0, "RECOVERY")]})
    run.records.append((20.0, fence(2)))
    assert kinds(liveness(run).findings) == []
    run = Run(down={"n2": [(16.5, 16.7)]})
    run.records.append((20.0, fence(2)))
    assert kinds(liveness(run).findings) == []


# -- uncommitted fencing attempts --------------------------------------------------------------


def _log_line(t: float, broker: int, node_id: int) -> str:
    stamp = datetime.fromtimestamp(T0 + t, UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return (
        f"[{stamp}] INFO [QuorumController id={node_id}] Fencing broker {broker} because its "
        "session has timed out. (org.apache.kafka.controller.ReplicationControlManager)\n"
    )


def test_an_uncommitted_fence_record_and_a_logged_attempt_are_notes(tmp_path):
    run = Run().kill("n3", 5.0, 15.0)
    run.records.append((7.9, fence(3)))
    d = run.write(tmp_path, tail={"n1": [(39.9, 1, fence(2))]})
    (d / "logs" / "n1").mkdir(parents=True)
    text = _log_line(7.85, 3, 1) + "[2026-01-01 00:00:00,000] INFO other\n" + _log_line(39.8, 2, 1)
    (d / "logs" / "n1" / "stdout.log").write_text(text)
    v = check(d, write=False)
    assert kinds(v.findings) == []
    lease = [n for n in v.notes if n.startswith("lease:")]
    (record,) = [n for n in lease if "wrote a fence of broker 2" in n]
    assert "metadata/n1.txt:" in record and "never committed" in record
    (attempt,) = [n for n in lease if "uncommitted fencing attempt" in n]
    assert (
        "n1 at " in attempt and "fenced broker 2" in attempt and "logs/n1/stdout.log:3" in attempt
    )
    (summary,) = [n for n in lease if "controllers logged" in n]
    assert "2 session-timeout fencing(s), 1 committed" in summary
    assert "logs/n1/stdout.log:1): committed (metadata/" in summary


def test_a_4x_log_line_with_its_epoch_is_read_too(tmp_path):
    from checkers.families.metadata_log.liveness import logged_fences

    (tmp_path / "logs" / "n2").mkdir(parents=True)
    line = _log_line(3.0, 5, 2).replace("broker 5 because", "broker 5 at epoch 17 because")
    (tmp_path / "logs" / "n2" / "stdout.log").write_text(line)
    (got,) = logged_fences(tmp_path, ["n1", "n2"])
    assert (got.node, got.broker, got.line) == ("n2", 5, 1)
    assert abs(got.wall - (T0 + 3.0)) < 0.001


def test_without_wall_clocks_nothing_is_judged():
    run = Run().kill("n3", 5.0, 15.0)
    rows = [{**r, "wall": None} for r in run.rows()]
    logs = run.logs()
    committed = committed_log(logs, majority_bound(logs, 3))
    result = lease_liveness(committed, logs, run.cluster, LivenessInput(rows), TIMEOUT_MS)
    assert result.findings == [] and any("no wall clock" in n for n in result.notes)


# -- generated -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    start=st.floats(2.0, 20.0),
    length=st.floats(0.5, 15.0),
    # A fence stamped at the kill's ok is before it (no obligation); records are stamped in ms.
    delay=st.floats(0.02, 0.98),
    package=st.sampled_from(["kill", "pause"]),
    node=st.sampled_from(["n2", "n3"]),  # n1 leads throughout
)
def test_a_fence_within_the_deadline_never_yields_a_finding(start, length, delay, package, node):
    run = Run()
    getattr(run, package)(node, start, start + length)
    broker = int(node[1:])
    run.records.append((start + 0.2 + delay * OWED, fence(broker)))
    result = liveness(run)
    assert kinds(result.findings) == []
    assert result.stats["lease_obligations"] == result.stats["lease_obligations_met"]
    if length > OWED + 0.7:  # the fault held (from its ok) past the deadline and a NoOp after
        assert result.stats["lease_obligations"] == 1


@settings(max_examples=30, deadline=None)
@given(start=st.floats(2.0, 20.0), length=st.floats(0.5, 15.0))
def test_never_fenced_is_a_finding_exactly_when_the_fault_outlasts_the_deadline(start, length):
    run = Run().kill("n2", start, start + length)
    found = kinds(liveness(run).findings)
    if length > OWED + 0.7:
        assert found == ["dead-broker-not-fenced"]
    elif length < OWED:
        assert found == []
