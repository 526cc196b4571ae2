"""Thick by default (issue 28): a new run's queue sends are pipelined, with pollers beside the
producers, and its plan says so explicitly; a stored plan keeps the meaning it had (what it
leaves out means the option's default, never a new run's value)."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.plan import build_plan, load_plan
from harness.run.recorder import Recorder
from harness.run.workers import Clients, ProcessIds
from harness.spec import OPTIONS, SpecError, spec_from_dict
from history.options import with_fresh
from history.reader import read_history
from tests.unit.harness.test_pipelined import FakeWorkload
from workloads.client import Completion, Invocation
from workloads.pipelined import history_header, slot_mix
from workloads.queue_ops import OpChooser

GOLDEN = Path(__file__).parent / "data" / "plans"


def _plan_only(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(main, ["run", "--plan-only", "--seed", "3", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_a_new_run_is_pipelined_and_its_plan_names_every_new_default():
    plan = _plan_only()
    spec, gen = plan["spec"], plan["generator"]
    assert (spec["send_mode"], spec["in_flight"], spec["linger_ms"]) == ("async", 2000, 50.0)
    assert (spec["pollers"], spec["rate"]) == (2, 0.0)
    # Two producer slots and two pollers: the mix has polls beside the sends.
    assert gen["mix"] == {"send": 2, "poll": 2} and gen["pollers"] == 2


def test_a_new_plan_replays_as_written(tmp_path):
    out = CliRunner().invoke(main, ["run", "--plan-only", "--seed", "3"]).output
    (tmp_path / "plan.json").write_text(out, encoding="utf-8")
    plan = load_plan(tmp_path)
    assert build_plan(plan.run_spec(), plan.seed).to_json() == out


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_every_stored_plan_replays_with_its_own_meaning(path):
    # The stored spec, read back as a replay reads it: no new run's value fills what it
    # leaves out (a spec without send_mode was sync), so the plan is the same bytes.
    text = path.read_text(encoding="utf-8")
    stored = json.loads(text)
    assert build_plan(spec_from_dict(stored["spec"]), stored["seed"]).to_json() == text
    assert "send_mode" not in stored["generator"] and "pollers" not in stored["generator"]


def test_a_stored_pipelined_spec_keeps_its_window_and_only_sends():
    gen = json.loads(build_plan(spec_from_dict({"send_mode": "async"}), 7).to_json())["generator"]
    assert (gen["in_flight"], gen["linger_ms"], gen["mix"]) == (5, 5.0, {"send": 1})
    assert "pollers" not in gen and gen["rate"] == 50.0


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ({}, {"send_mode": "async", "in_flight": 2000, "pollers": 2, "rate": 0.0}),
        ({"send_mode": "sync"}, {"send_mode": "sync", "in_flight": None, "rate": 50.0}),
        ({"workload": "admin"}, {"send_mode": None, "pollers": None, "rate": 50.0}),
        ({"txn": True}, {"in_flight": 100, "pollers": 2}),
        ({"client": "java"}, {"in_flight": 50_000}),
        ({"client": "java", "send_recorder": "harness"}, {"in_flight": 2000}),
        ({"concurrency": 1}, {"pollers": 0}),
        ({"concurrency": 7, "rate": 300.0}, {"pollers": 3, "rate": 300.0}),
        ({"in_flight": 9, "linger_ms": 1.0}, {"in_flight": 9, "linger_ms": 1.0}),
    ],
)
def test_a_new_run_gets_fresh_values_only_for_what_it_leaves_out(given, wanted):
    values = with_fresh(OPTIONS, given)
    assert {k: values.get(k) for k in wanted} == wanted


def test_fresh_values_pass_the_same_checks_as_given_ones():
    with pytest.raises(SpecError, match="--pollers: 4 leaves no producer"):
        spec_from_dict({"pollers": 4}, fresh=True)
    with pytest.raises(SpecError, match="--pollers: only applies with --send-mode async"):
        spec_from_dict({"send_mode": "sync", "pollers": 1}, fresh=True)
    # A single slot has no poller: nothing about pollers is written.
    spec = spec_from_dict({"concurrency": 1}, fresh=True).to_dict()
    assert "pollers" not in spec and spec["send_mode"] == "async"


def test_pollers_draw_polls_and_producers_sends():
    gen = _plan_only("--txn")["generator"]
    assert gen["mix"] == {"txn": 2, "poll": 2}
    # Pipelined transactions: one process per slot; slots 2 and 3 poll, retired ones too.
    for process, only in (
        (0, "txn"),
        (1, "txn"),
        (2, "poll"),
        (3, "poll"),
        (6, "poll"),
        (5, "txn"),
    ):
        chooser = OpChooser(gen, process, random.Random(process))
        assert {chooser.next_op({}).f for _ in range(30)} == {only}
    gen = _plan_only()["generator"]
    lanes = gen["in_flight"]
    assert slot_mix(gen, 2 * lanes) == {"poll": 1}
    assert slot_mix(gen, 3 * lanes + 7 + 4 * lanes) == {"poll": 1}
    assert slot_mix(gen, lanes + 5) == {"send": 1}


class _Poller:
    """A consumer process that answers each poll at once."""

    setup_op = None

    def __init__(self, process: int) -> None:
        self.process = process

    def next_op(self) -> Invocation:
        return Invocation("poll", [["poll"]])

    def apply(self, op: Invocation) -> Completion:
        time.sleep(0.001)
        return Completion("ok", [["poll", {}]])

    def close(self) -> None:
        pass


class _WithPollers(FakeWorkload):
    def __init__(self, lanes: int, pollers: int) -> None:
        super().__init__(lanes)
        self.pollers = pollers

    def poller_slots(self) -> int:
        return self.pollers

    def client(self, process: int, rng: random.Random) -> _Poller:
        return _Poller(process)


def test_poller_slots_poll_beside_pipelined_producers(tmp_path):
    lanes, concurrency = 4, 3
    rec = Recorder(
        tmp_path / "history.jsonl",
        "t",
        header=history_header({"send_mode": "async", "in_flight": 4}),
    )
    stop = threading.Event()
    wl = _WithPollers(lanes, pollers=1)
    # A rate paces the producers only: the poller is not held to it.
    clients = Clients(wl, rec, 1, concurrency, 20.0, ProcessIds(concurrency * lanes), stop)  # type: ignore[arg-type]
    clients.start()
    time.sleep(0.5)
    stop.set()
    clients.join(10)
    rec.close()
    ops = read_history(tmp_path / "history.jsonl").ops
    polls = [op for op in ops if op["f"] == "poll"]
    sends = [op for op in ops if op["f"] == "send" and op["type"] == "invoke"]
    # The last slot polls as process 2 * lanes (its first lane's id), and sends come from the
    # producer slots' lanes only.
    assert polls and {op["process"] for op in polls} == {2 * lanes}
    assert sends and all(op["process"] % (concurrency * lanes) < 2 * lanes for op in sends)
    assert sum(op["type"] == "invoke" for op in polls) > len(sends)
