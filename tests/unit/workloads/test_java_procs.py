"""Each worker slot's Java client in a JVM of its own (workloads/java_procs.py): the face the
client faults see (nemesis/targets.py ClientProcess), a JVM replaced after a kill, a call that
waits out a stop or a hold, and the plan field that asks for it."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from typing import Any

import pytest

from harness.plan import build_plan
from harness.spec import spec_from_dict
from nemesis import targets
from tests.unit.workloads.test_java_client import _cached_dist
from workloads import client_procs, java_procs
from workloads.client_procs import CLIENT_NETS as CLIENT_NETS_FIELD
from workloads.client_procs import CLIENT_PROCS as CLIENT_PROCS_FIELD
from workloads.java_host import JavaError, JavaGone, JavaHost, conf_args, proc_state
from workloads.java_procs import JavaProcess, SlotJvms
from workloads.queue import client_timeouts


class _Host:
    """A stand-in JVM: alive until `gone`, answering hold and release."""

    pids = iter(range(1000, 2000))

    def __init__(self) -> None:
        self.pid = next(self.pids)
        self.alive = True
        self.held = False
        self.said: list[tuple[str, tuple[Any, ...]]] = []
        self.closed = False

    def call(self, cmd: str, h: int, *args: Any, timeout: float) -> Any:
        if not self.alive:
            raise JavaGone("exited")
        self.said.append((cmd, args))
        return True

    def close(self) -> None:
        self.closed = True


def test_the_hint_names_are_the_nemesis_ones():
    assert client_procs.CLIENT_PROCS_HINT == targets.CLIENT_PROCS_HINT
    assert client_procs.CLIENT_TIMEOUTS_HINT == targets.CLIENT_TIMEOUTS_HINT


def test_a_slot_gets_a_fresh_jvm_after_its_last_is_gone():
    made: list[_Host] = []

    def start(slot: int) -> Any:
        assert slot == 2
        made.append(_Host())
        return made[-1]

    proc = JavaProcess(2, "producer", start)
    assert proc.pid() is None  # no client yet
    first = proc.host()
    assert proc.host() is first and proc.pid() == first.pid
    first.alive = False  # SIGKILL: the reader saw the pipe close
    assert proc.pid() is None
    second = proc.host()
    assert second is not first and first.closed and proc.pid() == second.pid
    proc.close()
    assert second.closed
    with pytest.raises(JavaGone):
        proc.host()


def test_hold_and_release_reach_the_jvm_and_mark_its_waits():
    proc = JavaProcess(0, "producer", lambda slot: _Host())
    host = proc.host()
    proc.hold("commit")
    assert host.held and host.said[-1] == ("hold", ("commit",))
    proc.release()
    assert not host.held and host.said[-1] == ("release", ())
    with pytest.raises(ValueError, match="no hold point"):
        proc.hold("poll")


def test_a_slot_without_a_jvm_of_its_own_uses_the_shared_one():
    jvms = SlotJvms([2, 3], lambda s: "share-consumer", lambda slot: _Host())
    assert jvms.host(0, 0) is None
    assert jvms.host(3, 7) is not None and jvms.procs[3].process == 7
    assert sorted(jvms.hint()) == [2, 3]
    jvms.close()


def test_timeouts_a_pause_may_outlast_are_the_runs():
    gen = {"txn": True, "mode": "subscribe"}
    assert client_timeouts(gen) == {
        "transaction.timeout.ms": 15000,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
        "session.timeout.ms": 6000,
    }
    assert client_timeouts({"txn": False, "mode": "assign"}) == {}


@pytest.mark.parametrize(
    ("nemesis", "wanted"),
    [
        (["client"], False),  # a bare client draws hijack alone, which needs no process
        (["client:hijack"], False),
        (["kill"], False),
        (["client:pause"], True),
        (["client:kill", "partition"], True),
        (["client:pause-commit"], True),
        (["client:isolate"], True),
    ],
)
def test_the_plan_asks_for_processes_only_for_the_kinds_that_stop_one_client(nemesis, wanted):
    spec = spec_from_dict({"nemesis": nemesis, "txn": True, "client": "java"}, fresh=True)
    gen = build_plan(spec, 1).generator
    assert gen.get(CLIENT_PROCS_FIELD, False) is wanted
    assert CLIENT_PROCS_FIELD in gen or not wanted  # absent, not false: old plans unchanged
    # Networks of their own only for the kind that cuts one client's.
    assert (CLIENT_NETS_FIELD in gen) is (nemesis == ["client:isolate"])


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_a_real_jvm_holds_a_send_waits_out_a_stop_and_is_replaced_after_a_kill():
    dist = _cached_dist()
    if dist is None:
        pytest.skip("no Kafka release assembled (make setup assembles one)")
    proc = JavaProcess(0, "producer", lambda slot: JavaHost(dist, heap=java_procs.SLOT_HEAP))
    try:
        host = proc.host()
        p = host.handle()
        conf = {"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 300}
        assert host.call("producer", p, *conf_args(conf), timeout=30) is True
        # Held before send: the reply (a refusal, no broker) comes only after the release.
        released = threading.Event()
        replied: list[bool] = []
        got = threading.Event()

        def reply(msg: dict[str, Any]) -> None:
            replied.append(released.is_set())
            got.set()

        proc.hold("send")
        host.call_async("send", p, "t", 0, "0", 1, callback=reply)
        # A later request of the same handle queues behind the held send.
        late = threading.Timer(1.0, lambda: (released.set(), proc.release()))
        late.start()
        assert got.wait(30) and replied == [True]
        # A stopped JVM: a call's wait does not count the stop, so it answers after SIGCONT.
        os.kill(host.pid, signal.SIGSTOP)
        while proc_state(host.pid) not in ("T", "t"):  # a signal is delivered, not at once
            threading.Event().wait(0.05)
        assert host.stalled()
        cont = threading.Timer(2.0, lambda: os.kill(host.pid, signal.SIGCONT))
        cont.start()
        assert isinstance(host.call("clock", 0, timeout=1), int)
        # Killed: what was asked ends unknown, and the slot's next client gets a new JVM.
        old = host.pid
        os.kill(old, signal.SIGKILL)
        with pytest.raises((JavaGone, JavaError)):
            host.call("clock", 0, timeout=30)
        assert proc.pid() is None
        assert proc.host().pid != old
    finally:
        proc.close()
