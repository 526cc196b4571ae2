"""librdkafka's queue clients in processes of their own (workloads/client_procs.py,
workloads/rdk_proc.py): real child interpreters, paused, killed, held and orphaned, against a
broker they cannot reach and against librdkafka's mock cluster in this process (reachable on
loopback), recorded through the real Recorder and Clients.do. No Docker."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.run.recorder import Recorder
from harness.run.workers import Clients, ProcessIds
from history.format import HELD_FIELD
from history.reader import read_history
from workloads.client import Invocation
from workloads.client_procs import (
    CLIENT_PROCS,
    ChildGone,
    ChildProcess,
    ChildSilent,
    SlotProcess,
    SlotProcesses,
    net_prefix,
)
from workloads.queue import QueueWorkload
from workloads.rdk_proc import FACTORY, ProcQueueClient

TOPIC = "kchaos-queue"
KEYS = 4  # librdkafka's mock cluster creates a topic with 4 partitions on first use
NOWHERE = "127.0.0.1:1"
# Bounds of waits for events (a child's exit, a hold reached), never asserted on.
WAIT_S = 60.0


def _gen(**over: Any) -> dict[str, Any]:
    gen = {
        "topic": TOPIC,
        "keys": KEYS,
        "mode": "assign",
        "txn": False,
        "mix": {"send": 1},
        "max_txn_ops": 4,
        "poll_max_messages": 64,
        "poll_timeout_ms": 100,
        "value_stride": 1_000_000,
        "replication": 3,
        "min_insync_replicas": 2,
        "concurrency": 2,
        "transactional_id": "per-slot",
    }
    gen.update(over)
    return gen


def _topology(bootstrap: str, ids: list[int]) -> Any:
    brokers = [SimpleNamespace(node_id=i, name=f"n{i}") for i in ids]
    return SimpleNamespace(brokers=brokers, bootstrap_servers=lambda: bootstrap)


def _config(bootstrap: str = NOWHERE, **gen: Any) -> dict[str, Any]:
    return {
        "gen": _gen(**gen),
        "run_id": "procs/1",
        "concurrency": 2,
        "bootstrap": bootstrap,
        "topic": TOPIC,
        "t0_ns": time.monotonic_ns(),
        "process": 0,
    }


def _send(key: int = 1, value: int = 5) -> Invocation:
    return Invocation("send", [["send", key, value]])


POLL = Invocation("poll", [["poll"]])


class Caller:
    """One call to a child on a thread of its own: what it returned or raised."""

    def __init__(self, child: ChildProcess, op: Invocation, timeout: float) -> None:
        self.result: Any = None
        self.thread = threading.Thread(target=self._run, args=(child, op, timeout))
        self.thread.start()

    def _run(self, child: ChildProcess, op: Invocation, timeout: float) -> None:
        try:
            self.result = child.call("apply", op, timeout)
        except (ChildGone, ChildSilent) as exc:
            self.result = exc

    def join(self) -> Any:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        return self.result


def _exited(pid: int) -> bool:
    """Waits (bounded) for a process that is not our child to end: its pidfd turns readable."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], WAIT_S)
        return bool(ready)
    finally:
        os.close(fd)


# The process plumbing, against a broker no one answers on --------------------------------------
def test_a_child_runs_the_queue_clients_ops_and_answers_them():
    child = ChildProcess(FACTORY, _config())
    try:
        assert child.pid != os.getpid() and child.alive()
        done, acked = child.call("open", Invocation("assign", [0, 2]), WAIT_S)
        assert (done.type, done.value, acked) == ("ok", [0, 2], [])
        # A poll with nothing to read is ok and empty, as in a thread.
        done, _ = child.call("apply", POLL, WAIT_S)
        assert (done.type, done.value) == ("ok", [["poll", {}]])
    finally:
        child.close()
    assert not child.alive()


class _EnvNet:
    """A slot's network whose entry is `env`: what its children are started behind shows in
    their environment (a real one enters a namespace with nsenter, clusters/client_net.py)."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def prefix(self) -> list[str]:
        return ["env", f"KCHAOS_NET_OF=slot{self.slot}"]


def test_each_slots_children_start_behind_their_own_networks_entry():
    nets = {0: _EnvNet(0), 1: _EnvNet(1)}
    slots = SlotProcesses(lambda s: "producer", lambda s: net_prefix(nets, s))
    children = [slots.slot(s).start(FACTORY, _config()) for s in (0, 1)]
    try:
        for s, child in enumerate(children):
            environ = Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")
            assert f"KCHAOS_NET_OF=slot{s}".encode() in environ
            done, _ = child.call("apply", POLL, WAIT_S)  # the child behind it serves as before
            assert done.type == "ok"
    finally:
        slots.close()
    assert net_prefix(None, 0) == [] and net_prefix(nets, 5) == []


def test_a_killed_child_ends_its_op_in_flight():
    slot = SlotProcess(0, "producer-consumer")
    child = slot.start(FACTORY, _config())
    try:
        # Held just before its produce(), the op is surely in flight when the kill comes.
        slot.hold("send")
        call = Caller(child, _send(), WAIT_S)
        assert child.holding.wait(WAIT_S)
        pid = slot.pid()
        assert pid == child.pid
        os.kill(pid, signal.SIGKILL)
        gone = call.join()
        assert isinstance(gone, ChildGone)
        assert str(gone) == f"client process {pid} killed by SIGKILL"
        assert slot.pid() is None
    finally:
        slot.kill()


def test_a_paused_child_answers_nothing_until_it_is_resumed():
    child = ChildProcess(FACTORY, _config())
    try:
        child.call("open", Invocation("assign", [0]), WAIT_S)
        os.kill(child.pid, signal.SIGSTOP)
        # Stopped, it cannot answer by any deadline: the op's outcome is unknown.
        with pytest.raises(ChildSilent):
            child.call("apply", POLL, 0.5)
    finally:
        child.close(0.0)  # its state unknown: killed, stopped or not
    assert child.proc.returncode == -signal.SIGKILL


def test_a_paused_child_completes_late_when_resumed_in_time():
    child = ChildProcess(FACTORY, _config())
    try:
        child.call("open", Invocation("assign", [0]), WAIT_S)
        os.kill(child.pid, signal.SIGSTOP)
        call = Caller(child, POLL, WAIT_S)
        os.kill(child.pid, signal.SIGCONT)
        done, _ = call.join()
        assert (done.type, done.value) == ("ok", [["poll", {}]])
    finally:
        child.close()


def test_a_child_exits_when_its_stdin_closes():
    child = ChildProcess(FACTORY, _config())
    child.proc.stdin.close()
    assert child.proc.wait(WAIT_S) == 0
    child.kill()


def test_children_die_with_their_client_host_even_when_stopped():
    # A client host of its own, killed as a crash would: its child, stopped, must go too.
    host = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from workloads.client_procs import ChildProcess\n"
            "from tests.unit.workloads.test_client_procs import FACTORY, _config\n"
            "c = ChildProcess(FACTORY, _config())\n"
            "print(c.pid, flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
        text=True,
    )
    try:
        pid = int(host.stdout.readline())
        os.kill(pid, signal.SIGSTOP)
        host.kill()
        host.wait(WAIT_S)
        assert _exited(pid)
    finally:
        host.kill()
        host.wait(WAIT_S)


def test_a_slot_holds_a_new_child_where_it_was_held(mock_cluster):
    slot = SlotProcess(3, "producer")
    slot.hold("send")
    child = slot.start(FACTORY, _config(mock_cluster[0]))
    assert slot.process == 0  # the fault's record names the Jepsen process it hit
    try:
        call = Caller(child, _send(1, 5), WAIT_S)
        assert child.holding.wait(WAIT_S)
        # Held before its produce(): nothing was sent yet, so nothing can have answered.
        assert call.thread.is_alive()
        slot.release()
        done, acked = call.join()
        assert done.type == "ok" and acked == [(1, done.value[0][2][0], 5)]
        assert child.held_s > 0
    finally:
        slot.kill()
    with pytest.raises(ValueError, match="no hold point 'flush'"):
        slot.hold("flush")


def test_a_held_commit_records_when_it_was_asked_held_and_first_acknowledged(mock_cluster):
    slot = SlotProcess(0, "transactional producer")
    child = slot.start(FACTORY, _config(mock_cluster[0], txn=True, transactional_id="per-slot"))
    try:
        slot.hold("commit")
        call = Caller(child, Invocation("txn", [["send", 1, 7], ["send", 2, 8]]), WAIT_S)
        assert child.holding.wait(WAIT_S)
        time.sleep(0.3)  # a hold of some length: its ms are what is asserted, not the sleep
        slot.release()
        done, acked = call.join()
    finally:
        slot.kill()
    assert done.type == "ok" and sorted(v for _, _, v in acked) == [7, 8]
    held = done.extra[HELD_FIELD]
    assert held["point"] == "commit" and held["ms"] > 0
    # The sends were acknowledged before the commit was asked (flush comes first).
    assert isinstance(held["first_ack"], int) and held["first_ack"] <= held["asked"]
    assert held["transaction.timeout.ms"] == 15000


@pytest.mark.parametrize("client_faults", [False, True])
def test_an_unheld_commit_is_recorded_only_in_a_run_with_client_faults(mock_cluster, client_faults):
    # A SIGSTOP or a cut may delay any commit of such a run past the timeout (zombie-commit).
    gen = {"txn": True, CLIENT_PROCS: client_faults}
    child = SlotProcess(0, "transactional producer").start(FACTORY, _config(mock_cluster[0], **gen))
    try:
        done, _ = child.call("apply", Invocation("txn", [["send", 1, 9]]), WAIT_S)
    finally:
        child.kill()
    assert done.type == "ok"
    held = (done.extra or {}).get(HELD_FIELD)
    if client_faults:
        assert held["ms"] == 0 and held["first_ack"] <= held["asked"]
    else:
        assert held is None


# On librdkafka's mock cluster: the history through Clients.do -------------------------------------
@pytest.fixture
def mock_cluster() -> Iterator[tuple[str, list[int], Producer]]:
    """Three mock brokers in this process, reachable on loopback by the children; the topic
    made by a first send (the mock answers no CreateTopics)."""
    owner = Producer({"test.mock.num.brokers": 3, "log_level": 0, "error_cb": lambda e: None})
    md = owner.list_topics(timeout=10)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    owner.produce(TOPIC, b"-1", partition=0)
    assert owner.flush(10) == 0
    yield bootstrap, sorted(md.brokers), owner
    owner.flush(0)


def _workload(mock: tuple[str, list[int], Producer], tmp_path: Path, procs: bool, **gen: Any):
    bootstrap, ids, _ = mock
    tmp_path.mkdir(exist_ok=True)
    wl = QueueWorkload(_gen(**{CLIENT_PROCS: procs}, **gen), _topology(bootstrap, ids), 7, "p/1")
    rec = Recorder(tmp_path / "history.jsonl", "p/1")
    wl.clock = rec.now_ns
    wl.side_recorder = rec
    clients = Clients(wl, rec, 7, 2, 0, ProcessIds(2), threading.Event())
    return wl, rec, clients


def _ops(
    mock: tuple[str, list[int], Producer], tmp_path: Path, procs: bool, n: int, **gen: Any
) -> tuple[list[tuple[Any, ...]], list[tuple[int, int]]]:
    """`n` ops of process 0 from seed 7: each completion's (f, type, value, error), and the
    sends the workload counted acknowledged."""
    wl, rec, clients = _workload(mock, tmp_path, procs, **gen)
    client = wl.client(0, random.Random(7))
    assert isinstance(client, ProcQueueClient) == procs
    try:
        assert clients.do(client, client.setup_op, client.open)
        for _ in range(n):
            assert clients.do(client, client.next_op(), client.apply)
    finally:
        client.close()
        wl.close()
        rec.close()
    ops = read_history(tmp_path / "history.jsonl").ops
    done = [(o["f"], o["type"], o["value"], o.get("error")) for o in ops if o["type"] != "invoke"]
    acked = [(k, int(v)) for k, vs in wl.acked.wanted().items() for v in vs]
    return done, sorted(acked)


@pytest.mark.parametrize("txn", [False, True])
def test_a_process_client_records_what_a_thread_client_records(mock_cluster, tmp_path, txn):
    gen: dict[str, Any] = {"mix": {"send": 1}}
    if txn:
        # A transaction's sends only (the pipelined transactions' shape): polls would read
        # whatever the mock had fetched by then.
        gen = {"txn": True, "mix": {"send": 1, "txn": 1}, "txn_sends": 3}
    threads = _ops(mock_cluster, tmp_path / "t", False, 12, **gen)
    procs = _ops(mock_cluster, tmp_path / "p", True, 12, **gen)
    assert [op[:2] for op in procs[0]] == [op[:2] for op in threads[0]]
    # The same sends, the same values (offsets differ: both wrote to one mock topic).
    assert procs[1] == threads[1]
    assert len(procs[1]) >= 12


def test_a_killed_process_retires_and_its_slot_goes_on_in_a_new_one(mock_cluster, tmp_path):
    wl, rec, clients = _workload(mock_cluster, tmp_path, True)
    client = wl.client(1, random.Random(1))
    hints = wl.hints()["client_processes"]
    assert list(hints) == [1] and hints[1].role == "producer"
    slot = hints[1]
    try:
        assert clients.do(client, client.setup_op, client.open)
        assert clients.do(client, client.next_op(), client.apply)
        first = slot.pid()
        slot.hold("send")
        result: list[bool] = []
        op = client.next_op()
        t = threading.Thread(target=lambda: result.append(clients.do(client, op, client.apply)))
        t.start()
        assert client.child is not None and client.child.holding.wait(WAIT_S)
        os.kill(first, signal.SIGKILL)
        t.join(WAIT_S)
        assert result == [False]  # the process retires
        slot.release()
        client.close()
        heir = wl.client(ProcessIds(2).retire(1), random.Random(3))
        assert clients.do(heir, heir.setup_op, heir.open)
        assert clients.do(heir, heir.next_op(), heir.apply)
        assert slot.pid() not in (None, first)
        heir.close()
    finally:
        wl.close()
        rec.close()
    assert slot.pid() is None
    ops = read_history(tmp_path / "history.jsonl").ops
    killed = [o for o in ops if o["type"] == "info"]
    assert [(o["process"], o["error"]) for o in killed] == [
        (1, f"client process {first} killed by SIGKILL")
    ]
    assert {o["process"] for o in ops} == {1, 3}


# Pipelined producers in processes ---------------------------------------------------------------
def _pipelined_gen() -> dict[str, Any]:
    return {
        "send_mode": "async",
        "in_flight": 5,
        "linger_ms": 5.0,
        "value_stride": 1_000_000_000,
        "mix": {"send": 1},
        CLIENT_PROCS: True,
    }


def test_a_pipelined_producer_in_a_process_records_each_send(mock_cluster, tmp_path):
    bootstrap, ids, _ = mock_cluster
    wl = QueueWorkload(_gen(**_pipelined_gen()), _topology(bootstrap, ids), 7, "pp/1")
    rec = Recorder(tmp_path / "history.jsonl", "pp/1")
    wl.clock, wl.side_recorder = rec.now_ns, rec
    stop = threading.Event()
    clients = Clients(wl, rec, 7, 2, 0, ProcessIds(2 * 5), stop)
    assert clients.lanes == 5
    slot = threading.Thread(target=clients.run_pipelined, args=(0,))
    slot.start()
    try:
        # Until 200 sends were acknowledged (the slot sends unpaced).
        deadline = time.monotonic() + WAIT_S
        while len(wl.acked) < 200 and time.monotonic() < deadline:
            stop.wait(0.05)
        assert wl.hints()["client_processes"][0].role == "producer"
        assert wl.hints()["client_processes"][0].pid() is not None
    finally:
        stop.set()
        slot.join(WAIT_S)
        wl.close()
        rec.close()
    ops = read_history(tmp_path / "history.jsonl").ops
    done = [o for o in ops if o["type"] != "invoke"]
    assert len(done) == len([o for o in ops if o["type"] == "invoke"])
    assert {o["type"] for o in done} == {"ok"}
    assert {o["process"] for o in ops} <= set(range(5))
    assert len(wl.acked) == len(done) >= 200
    assert all(o["producer"] == 0 for o in ops)


def _polled_until(producer: Any, done: Any) -> None:
    """Serves the producer's child until `done()` (bounded: the event, not a time, is tested)."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, "not reached"
        producer.poll(0.05)


def test_a_killed_pipelined_producer_ends_its_sends_in_flight(mock_cluster, tmp_path):
    bootstrap, ids, _ = mock_cluster
    wl = QueueWorkload(_gen(**_pipelined_gen()), _topology(bootstrap, ids), 7, "pp/2")
    try:
        producer = wl.producer_client(1, random.Random(1))
        slot = wl.hints()["client_processes"][1]
        got: list[Any] = []
        op = producer.next_op()
        assert producer.send(op, got.append) is None
        _polled_until(producer, lambda: got)
        assert got[0].type == "ok" and wl.sends_in_flight.by_partition() == {}
        slot.hold("send")
        held = producer.next_op()
        assert producer.send(held, got.append) is None
        # The child says when it waits at the held point (the producer's _take).
        _polled_until(producer, lambda: producer.held)
        assert wl.sends_in_flight.by_partition() == {held.value[0][1]: 1}
        pid = slot.pid()
        os.kill(pid, signal.SIGKILL)
        _polled_until(producer, lambda: len(got) == 2)
        assert (got[1].type, got[1].error) == ("info", f"client process {pid} killed by SIGKILL")
        assert producer.broken and wl.sends_in_flight.by_partition() == {}
        producer.close()
        assert slot.pid() is None
    finally:
        wl.close()
