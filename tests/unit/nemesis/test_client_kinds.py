"""The client package's process kinds (nemesis/client.py): which slot a step hits, how long a
pause lasts from the run's timeouts, the refusals, and that every exit path lets the client go.
The processes stopped and killed here are this test's own `sleep` children."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from clusters.topology import build_topology
from history.effects import CUT, DOWN, EFFECTS, RESUMED, STALLED, STOPPED
from nemesis import client as c
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, NotApplied
from nemesis.targets import CLIENT_NETS_HINT, CLIENT_PROCS_HINT, CLIENT_TIMEOUTS_HINT, TXN_IDS_HINT
from workloads.java_host import proc_state

TOPO = build_topology("kraft-combined", cluster="clienttest")
TXN = {
    "transaction.timeout.ms": 15000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
}


class _Proc:
    """A slot's client: a `sleep` child standing in for its JVM, and the holds it was told."""

    def __init__(self, slot: int, role: str = "producer+consumer") -> None:
        self.slot = slot
        self.role = role
        self.process = slot
        self.child: subprocess.Popen[bytes] | None = None
        self.told: list[str] = []

    def start(self) -> None:
        self.child = subprocess.Popen(["sleep", "60"])
        cmdline = Path(f"/proc/{self.child.pid}/cmdline")
        while b"sleep" not in cmdline.read_bytes():  # until the fork has exec'd
            time.sleep(0.01)

    def pid(self) -> int | None:
        return None if self.child is None else self.child.pid

    def hold(self, point: str) -> None:
        self.told.append(f"hold {point}")

    def release(self) -> None:
        self.told.append("release")

    def end(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child.wait()


@pytest.fixture
def sleepers(monkeypatch, tmp_path):
    monkeypatch.setattr(c, "CLIENT_MARKS", (b"sleep",))
    monkeypatch.setattr(c, "STOPPED_DIR", tmp_path / "stopped")
    monkeypatch.setattr(c.ClientNemesis, "_faults", {})
    made: list[_Proc] = []
    yield made
    for p in made:
        p.end()


def _ctx(procs: dict[int, Any], txn: bool = True, timeouts: dict[str, int] | None = None):
    hints: dict[str, Any] = {CLIENT_PROCS_HINT: procs, CLIENT_TIMEOUTS_HINT: timeouts or {}}
    if txn:
        hints[TXN_IDS_HINT] = [f"t-slot{s}" for s in sorted(procs)]
    return FaultContext(TOPO, {}, hints)


def _step(kind: str, action: str = "start", length: str | None = "long", seed: int = 7):
    params = {} if length is None else {c.LENGTH: length}
    return FaultStep(1.0, action, "client", kind, None, seed, params)


def _wait_state(pid: int, states: tuple[str, ...]) -> str | None:
    for _ in range(200):
        s = proc_state(pid)
        if s in states:
            return s
        time.sleep(0.01)
    return proc_state(pid)


def test_lengths_outlast_the_longest_timeout_or_stay_under_the_shortest():
    assert c.lengths(TXN) == {c.SHORT: 7.5, c.LONG: 35.0}  # 15 s + the 10 s abort check + 10
    both = {**TXN, "session.timeout.ms": 6000}
    assert c.lengths(both) == {c.SHORT: 3.0, c.LONG: 35.0}
    assert c.lengths({"group.share.record.lock.duration.ms": 15000}) == {c.SHORT: 7.5, c.LONG: 25.0}
    assert c.lengths({}) == c.NO_TIMEOUT_S


def test_a_bare_client_item_draws_hijack_alone_as_stored_plans_did():
    drawn = [k.name for k in c.MENU.kinds if k.drawn]
    assert drawn == [c.HIJACK]
    assert c.needs_processes([c.PAUSE]) and not c.needs_processes([c.HIJACK])


def test_kinds_that_cannot_apply_say_why_in_one_line():
    nem = c.ClientNemesis()
    with pytest.raises(NotApplied, match="process of its own"):
        nem.start(FaultContext(TOPO, {}, {}), _step(c.PAUSE))
    with pytest.raises(NotApplied, match=r"--txn"):
        nem.start(_ctx({0: _Proc(0)}, txn=False), _step(c.PAUSE_COMMIT))
    with pytest.raises(NotApplied, match="no client process now"):
        nem.start(_ctx({0: _Proc(0)}), _step(c.KILL, length=None))
    with pytest.raises(NemesisError, match="length"):
        nem.start(_ctx({0: _Proc(0)}), _step(c.PAUSE, length=None))


def test_pause_and_kill_hit_a_consumer_and_send_holds_a_producer():
    procs = {0: _Proc(0, "producer"), 1: _Proc(1, "share-consumer"), 2: _Proc(2, "producer")}
    for seed in range(20):
        assert c.client_of(c.PAUSE, {CLIENT_PROCS_HINT: procs}, seed).slot == 1
        assert c.client_of(c.KILL, {CLIENT_PROCS_HINT: procs}, seed).slot == 1
        assert c.client_of(c.PAUSE_SEND, {CLIENT_PROCS_HINT: procs}, seed).slot in (0, 2)


def test_pause_stops_the_slots_process_until_the_stop_and_records_it(sleepers):
    proc = _Proc(0)
    sleepers.append(proc)
    proc.start()
    pid = proc.pid()
    assert pid is not None
    nem = c.ClientNemesis()
    ctx = _ctx({0: proc}, timeouts=TXN)
    value = nem.start(ctx, _step(c.PAUSE))
    assert _wait_state(pid, ("T", "t")) in ("T", "t")
    assert value["slot"] == 0 and value["pid"] == pid and value["process"] == 0
    assert value["duration_s"] == 35.0 and value["timeouts_ms"] == TXN
    assert [e["effect"] for e in value[EFFECTS]] == [STOPPED]
    assert (c.STOPPED_DIR / TOPO.cluster / str(pid)).exists()
    stopped = nem.stop(ctx, _step(c.PAUSE, "stop"))
    assert stopped["ended_by"] == "stop" and [e["effect"] for e in stopped[EFFECTS]] == [RESUMED]
    assert _wait_state(pid, ("S", "R")) in ("S", "R")
    assert not (c.STOPPED_DIR / TOPO.cluster / str(pid)).exists()


def test_a_short_pause_ends_by_its_length_before_the_stop(sleepers):
    proc = _Proc(0)
    sleepers.append(proc)
    proc.start()
    nem = c.ClientNemesis()
    ctx = _ctx({0: proc}, timeouts={"session.timeout.ms": 2000})  # short: 1 s
    nem.start(ctx, _step(c.PAUSE, length=c.SHORT))
    pid = proc.pid()
    assert pid is not None
    assert _wait_state(pid, ("S",)) == "S"  # continued by the timer
    assert nem.stop(ctx, _step(c.PAUSE, "stop", c.SHORT))["ended_by"] == "length"


def test_kill_ends_the_process(sleepers):
    proc = _Proc(0)
    sleepers.append(proc)
    proc.start()
    value = c.ClientNemesis().start(_ctx({0: proc}), _step(c.KILL, length=None))
    assert [e["effect"] for e in value[EFFECTS]] == [DOWN]
    assert proc.child is not None and proc.child.wait(10) == -9


def test_hold_kinds_hold_the_point_and_every_exit_lets_go(sleepers):
    proc = _Proc(0)
    sleepers.append(proc)
    proc.start()
    ctx = _ctx({0: proc}, timeouts=TXN)
    nem = c.ClientNemesis()
    value = nem.start(ctx, _step(c.PAUSE_COMMIT))
    assert value["point"] == "commit" and [e["effect"] for e in value[EFFECTS]] == [STALLED]
    assert proc.told == ["hold commit"]
    # The heal at a run's end builds a fresh package (nemesis/heal.py): it still lets go.
    healed = c.ClientNemesis().heal_all(ctx)
    assert proc.told == ["hold commit", "release"]
    assert any("pause-commit" in h for h in healed)
    assert nem.stop(ctx, _step(c.PAUSE_COMMIT, "stop"))["ended"] is False


def test_heal_continues_a_client_a_dead_harness_left_stopped(sleepers):
    proc = _Proc(0)
    sleepers.append(proc)
    proc.start()
    pid = proc.pid()
    assert pid is not None
    c.ClientNemesis().start(_ctx({0: proc}, timeouts=TXN), _step(c.PAUSE))
    assert _wait_state(pid, ("T", "t")) in ("T", "t")
    c.ClientNemesis._faults.clear()  # the harness that paused it is gone: only its file is left
    done = c.ClientNemesis().heal_all(FaultContext(TOPO, {}, {}))
    assert done == [f"continued the stopped client JVM {pid}"]
    assert _wait_state(pid, ("S", "R")) in ("S", "R")
    # Another cluster's stopped clients are not this heal's.
    assert c.continue_stopped("othercluster") == []


class _Net:
    """A slot's client network as the isolate kind sees it: what it was told."""

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.told: list[str] = []

    def prefix(self) -> list[str]:
        return []

    def cut(self) -> str:
        self.told.append("cut")
        return f"DROP in slot {self.slot}'s network"

    def mend(self) -> bool:
        cut = bool(self.told) and self.told[-1] == "cut"
        self.told.append("mend")
        return cut


def test_isolate_cuts_the_slots_network_until_the_stop_and_names_no_node(sleepers):
    procs = {0: _Proc(0, "producer"), 1: _Proc(1, "producer")}
    nets = {0: _Net(0), 1: _Net(1)}
    ctx = _ctx(procs, timeouts=TXN)
    ctx.hints[CLIENT_NETS_HINT] = nets
    nem = c.ClientNemesis()
    value = nem.start(ctx, _step(c.ISOLATE, seed=3))
    slot = value["slot"]
    # A slot between a kill and its heir has no pid: its network is cut all the same.
    assert value["pid"] is None and value[c.LENGTH] == c.LONG and value["duration_s"] == 35.0
    assert nets[slot].told == ["cut"] and nets[1 - slot].told == []
    (cut,) = value[EFFECTS]
    assert cut["effect"] == CUT and cut["nodes"] == [] and cut["links"] == []
    stopped = nem.stop(ctx, _step(c.ISOLATE, "stop", seed=3))
    assert stopped["ended_by"] == "stop" and [e["effect"] for e in stopped[EFFECTS]] == [RESUMED]
    assert nets[slot].told == ["cut", "mend"]


def test_a_short_isolation_ends_by_its_length_and_heal_mends_what_is_left(sleepers):
    nets = {0: _Net(0)}
    ctx = _ctx({0: _Proc(0)}, timeouts={"session.timeout.ms": 2000})
    ctx.hints[CLIENT_NETS_HINT] = nets
    nem = c.ClientNemesis()
    assert nem.start(ctx, _step(c.ISOLATE, length="short"))["duration_s"] == 1.0
    for _ in range(300):
        if nets[0].told == ["cut", "mend"]:
            break
        time.sleep(0.01)
    assert nets[0].told == ["cut", "mend"]
    assert nem.stop(ctx, _step(c.ISOLATE, "stop", length="short"))["ended_by"] == "length"
    nem.start(ctx, _step(c.ISOLATE, seed=8))
    healed = c.ClientNemesis().heal_all(ctx)
    assert nets[0].told[-1] == "mend" and any("isolate" in h for h in healed)


def test_isolate_without_networks_of_its_own_is_refused_in_one_line():
    with pytest.raises(NotApplied, match="network of its own"):
        c.ClientNemesis().start(_ctx({0: _Proc(0)}), _step(c.ISOLATE))
    with pytest.raises(NemesisError, match="length"):
        c.ClientNemesis().start(_ctx({0: _Proc(0)}), _step(c.ISOLATE, length=None))
    assert c.needs_networks([c.ISOLATE]) and c.needs_processes([c.ISOLATE])
    assert not c.needs_networks([c.PAUSE, c.HIJACK])
