"""librdkafka's queue clients in processes of their own (the generator's ``client_procs``) in a
real run, on Kafka 4.4 and 3.9, with and without transactions: a tiny in-tree driver in the
pause package's place stops (SIGSTOP ... SIGCONT), kills (SIGKILL) or holds one slot's client
process, found through the workload's hints (``client_processes``, nemesis/targets.py). The run
is judged valid, and every killed client's process retired: its op ended ``info`` and its slot
went on as a new process. Slow (four real runs): not in ``make test``."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
from typing import Any

import pytest

from harness.plan import Plan
from history.reader import read_history
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NotApplied
from tests.integration.runs import quiet_run
from workloads.client_procs import CLIENT_PROCS

pytestmark = pytest.mark.slow

NAME = "rdk33"
SUBNET = "10.213.212.0/24"
CONCURRENCY = 4


class ClientSignals:
    """Stands in for the client faults (nemesis/client.py's, on another branch): one slot's
    client process, by the step's seed, stopped until the step's stop, killed, or held at a
    point until the step's stop."""

    fault = "pause"

    def __init__(self, points: tuple[str, ...]) -> None:
        self.points = points
        self.stopped: dict[int, int] = {}  # step seed -> pid
        self.held: dict[int, Any] = {}  # step seed -> ClientProcess

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        procs = ctx.hints.get("client_processes") or {}
        live = {slot: (p, p.pid()) for slot, p in procs.items() if p.pid() is not None}
        if not live:
            raise NotApplied("no client process is running")
        rng = random.Random(step.seed)
        slot = rng.choice(sorted(live))
        proc, pid = live[slot]
        how = rng.choice(("SIGKILL", "SIGSTOP", "hold"))
        if how == "hold":
            point = rng.choice(self.points)
            proc.hold(point)
            self.held[step.seed] = proc
            return {"slot": slot, "pid": pid, "hold": point}
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.Signals[how])
        if how == "SIGSTOP":
            self.stopped[step.seed] = pid
        return {"slot": slot, "pid": pid, "signal": how}

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        pid = self.stopped.pop(step.seed, None)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        proc = self.held.pop(step.seed, None)
        if proc is not None:
            proc.release()
        return {"resumed": pid, "released": proc.slot if proc is not None else None}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        done = []
        for pid in self.stopped.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                done.append(f"sent SIGCONT to client process {pid}")
        for proc in self.held.values():
            proc.release()
            done.append(f"released slot {proc.slot}")
        self.stopped.clear()
        self.held.clear()
        return done


def _procs_on(plan: Plan) -> None:
    plan.generator[CLIENT_PROCS] = True


@pytest.mark.parametrize(
    ("version", "txn", "send_mode"),
    [
        ("4.4", False, "sync"),
        ("4.4", True, "sync"),
        ("3.9", False, "sync"),
        ("3.9", True, "sync"),
        # Pipelined producers (and their pollers' consumers) in processes.
        ("4.4", False, "async"),
    ],
    ids=["4.4-plain", "4.4-txn", "3.9-plain", "3.9-txn", "4.4-async"],
)
def test_client_processes_are_paused_killed_and_held_and_the_run_stays_valid(
    docker_client, tmp_path, version, txn, send_mode
):
    points = ("send", "commit", "abort") if txn else ("send",)
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        33,
        tmp_path,
        version=version,
        txn=txn,
        send_mode=send_mode,
        concurrency=CONCURRENCY,
        nemesis=["pause"],
        nemesis_interval=4,
        time_limit=30,
        rate=40,
        final_timeout=60,
        nemeses={"pause": ClientSignals(points)},
        plan_edit=_procs_on,
    )
    assert done.left_behind == []
    d = done.result.run_dir
    results = json.loads((d / "results.json").read_text())
    run = json.loads((d / "run.json").read_text())
    print(f"\n{version} txn={txn} {send_mode}: {d} {results['status']}")
    print("final reads:", {k: v for k, v in run["final_reads"].items() if k != "missing"})
    assert results["status"] == "valid", results
    assert done.result.exit_code == 0
    assert run["final_reads"]["complete"] is True

    history = read_history(d)
    ops = history.ops
    # Process ids per slot: a pipelined producer's lanes (docs/history.md), else 1.
    lanes = int(history.header.get("in_flight") or 1)
    faults = [
        op["value"]
        for op in ops
        if op["process"] == "nemesis" and op["f"] == "start-pause" and op["type"] == "ok"
    ]
    print("faults:", faults)
    kills = [f for f in faults if f.get("signal") == "SIGKILL"]
    assert kills, "the seed drew no kill"
    clients = [op for op in ops if isinstance(op["process"], int)]
    for kill in kills:
        check_kill(kill, ops, clients, lanes)


def check_kill(
    kill: dict[str, Any], ops: list[dict[str, Any]], clients: list[dict[str, Any]], lanes: int
) -> None:
    """The kill ended the ops in flight `info` (a sync slot's, or its next one finding the
    process gone; a pipelined producer's sends in flight, maybe none), their processes
    retired, and the slot went on: as a new process, or (pipelined) as its next producer."""
    why = f"client process {kill['pid']} killed by SIGKILL"
    ended = [i for i, op in enumerate(clients) if op["type"] == "info" and op.get("error") == why]
    for at in ended:
        gone = clients[at]["process"]
        assert all(op["process"] != gone for op in clients[at + 1 :])
    killed_at = next(
        op["time"]
        for op in ops
        if op["process"] == "nemesis" and op["type"] == "ok" and op["value"] == kill
    )
    before = [op for op in clients if op["time"] < killed_at]
    after = [op for op in clients if op["time"] > killed_at]
    slot = kill["slot"]
    if lanes > 1:  # a pipelined producer: each slot's producers are slot + k * concurrency
        mine = {op["producer"] for op in before if op.get("producer", -1) % CONCURRENCY == slot}
        assert any(
            op.get("producer", -1) > max(mine)
            for op in after
            if op.get("producer", -1) % CONCURRENCY == slot
        )
        return
    assert len(ended) == 1, (why, ended)
    op = clients[ended[0]]
    assert (op["process"] // lanes) % CONCURRENCY == slot
    assert any(o["process"] == op["process"] + CONCURRENCY * lanes for o in after)
