"""Pipelined sends (--send-mode async) without a cluster: the lanes' bookkeeping, the slot loop
over a fake producer whose delivery reports arrive in any order, and librdkafka's own mock
cluster and timeouts through the real PipelinedProducer."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.plan import build_plan
from harness.run.recorder import Recorder
from harness.run.workers import Clients, Lanes, ProcessIds
from harness.spec import RunSpec, SpecError, spec_from_dict
from history.columnar import to_table
from history.reader import read_history
from workloads.client import Completion, Invocation
from workloads.pipelined import PipelinedProducer, history_header, lanes_of
from workloads.queue_ops import OpChooser


def test_lanes_free_after_recording_and_retire_on_info():
    ids = ProcessIds(2 * 3)  # two slots of three lanes
    lanes = Lanes([3, 4, 5], ids)
    got = [lanes.take() for _ in range(4)]
    assert got == [3, 4, 5, None]
    ops = {p: Invocation("send", [["send", 0, p]]) for p in got[:3]}
    for p, op in ops.items():
        lanes.start(p, op)
    recorded = []
    assert lanes.finish(4, ops[4], retire=True, record=lambda: recorded.append(4))
    assert lanes.finish(3, ops[3], retire=False, record=lambda: recorded.append(3))
    # A report for an op the lane no longer runs is not recorded.
    assert not lanes.finish(3, ops[3], retire=False, record=lambda: recorded.append("again"))
    assert recorded == [4, 3]
    # Process 4 ended info: its lane goes on as 4 + 6.
    assert sorted([lanes.take(), lanes.take()]) == [3, 10]
    assert lanes.in_flight == 1
    gone = []
    assert lanes.abandon(lambda p, op: gone.append((p, op.value))) == 1
    assert gone == [(5, [["send", 0, 5]])]
    assert lanes.take() == 11 and lanes.in_flight == 0


class FakeProducer:
    """Delivery reports served by poll(), out of order across lanes; every 7th send info."""

    def __init__(self, producer: int, rng: random.Random, log: dict[int, list[int]]) -> None:
        self.producer = producer
        self.broken = False
        self.rng = rng
        self._n = producer * 1_000_000
        self._queued: list[tuple[Invocation, Any]] = []
        self._offsets: dict[int, int] = defaultdict(int)
        self.log = log

    def next_op(self) -> Invocation:
        self._n += 1
        return Invocation("send", [["send", self.rng.randrange(3), self._n]], "n1")

    def send(self, op: Invocation, done: Any) -> Completion | None:
        self.log[self.producer].append(op.value[0][2])
        if op.value[0][2] % 11 == 0:
            return Completion("fail", op.value, "refused", op.node)
        self._queued.append((op, done))
        return None

    def poll(self, timeout: float) -> None:
        self.rng.shuffle(self._queued)
        served, self._queued = self._queued[:3], self._queued[3:]
        for op, done in served:
            _, key, value = op.value[0]
            if value % 7 == 0:
                done(Completion("info", op.value, "timed out", op.node))
            else:
                self._offsets[key] += 1
                done(Completion("ok", [["send", key, [self._offsets[key], value]]], None, "n2"))
        if not served and timeout:
            time.sleep(min(timeout, 0.001))

    def close(self) -> None:
        pass


class FakeWorkload:
    def __init__(self, lanes: int) -> None:
        self.lanes = lanes
        self.log: dict[int, list[int]] = defaultdict(list)

    def pipelined_lanes(self) -> int:
        return self.lanes

    def producer_client(self, producer: int, rng: random.Random) -> FakeProducer:
        return FakeProducer(producer, rng, self.log)


def _run_slots(tmp_path, workload, concurrency: int, lanes: int, seconds: float, rate=0.0):
    rec = Recorder(tmp_path / "history.jsonl", "t", header=history_header(_gen(lanes)))
    stop = threading.Event()
    clients = Clients(workload, rec, 1, concurrency, rate, ProcessIds(concurrency * lanes), stop)  # type: ignore[arg-type]
    clients.start()
    time.sleep(seconds)
    stop.set()
    clients.join(10)
    rec.close()
    return read_history(tmp_path / "history.jsonl")


def _gen(lanes: int) -> dict[str, Any]:
    return {"send_mode": "async", "in_flight": lanes}


def test_slots_keep_one_op_per_process_and_at_most_n_per_producer(tmp_path):
    wl = FakeWorkload(lanes=4)
    h = _run_slots(tmp_path, wl, concurrency=2, lanes=4, seconds=0.5)
    assert h.header["send_mode"] == "async" and h.header["in_flight"] == 4
    assert not h.incomplete  # every send completed before the slots ended
    in_flight: dict[int, int] = defaultdict(int)
    invoked: dict[int, list[int]] = defaultdict(list)
    slot_of_process: dict[int, int] = {}
    retired = set()
    types = defaultdict(int)
    for op in h.ops:
        q, p = op["producer"], op["process"]
        assert p not in retired, f"process {p} ran again after an info"
        # Lane l of slot s runs processes l, l + 8, l + 16, ...; producer q runs on slot q % 2.
        assert slot_of_process.setdefault(p % 8, q % 2) == q % 2
        assert (p % 8) // 4 == q % 2
        if op["type"] == "invoke":
            in_flight[q] += 1
            assert in_flight[q] <= 4
            invoked[q].append(op["value"][0][2])
        else:
            in_flight[q] -= 1
            types[op["type"]] += 1
            if op["type"] == "info":
                retired.add(p)
    # The order of a producer's invocations is its send order.
    assert dict(invoked) == dict(wl.log)
    assert types["ok"] > 100 and types["info"] > 0 and types["fail"] > 0
    # Every info retired its process: a later op of that lane ran as p + 8.
    assert any(op["process"] >= 8 for op in h.ops)


def test_paced_slots_keep_the_rate(tmp_path):
    wl = FakeWorkload(lanes=5)
    h = _run_slots(tmp_path, wl, concurrency=2, lanes=5, seconds=1.0, rate=100)
    invokes = sum(op["type"] == "invoke" for op in h.ops)
    assert 60 <= invokes <= 130


def test_producer_field_reaches_the_columnar_form(tmp_path):
    h = _run_slots(tmp_path, FakeWorkload(lanes=2), concurrency=1, lanes=2, seconds=0.2)
    table = to_table(h).to_pydict()
    ops = [i for i, r in enumerate(table["row"]) if r == "op"]
    assert all(table["producer"][i] == 0 for i in ops)
    elems = [i for i, r in enumerate(table["row"]) if r == "elem"]
    assert elems and all(table["producer"][i] == 0 for i in elems)


class MockQueue:
    """What PipelinedProducer reads of a QueueWorkload."""

    def __init__(self) -> None:
        self.keys, self.topic = 4, "kchaos-queue"
        self.gen = {"value_stride": 1_000_000_000, "linger_ms": 1.0}
        self.leaders = SimpleNamespace(leaders={})
        self.acked: list[tuple[int, int | None, int]] = []
        self.lanes = 8

    def note_acked(self, key: int, offset: int | None, value: int) -> None:
        self.acked.append((key, offset, value))

    def pipelined_lanes(self) -> int:
        return self.lanes

    def producer_client(self, producer: int, rng: random.Random) -> PipelinedProducer:
        conf = {
            "test.mock.num.brokers": 3,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "message.timeout.ms": 5000,
        }
        return PipelinedProducer(self, producer, rng, conf)  # type: ignore[arg-type]


def test_librdkafka_mock_cluster_completes_every_send_in_order(tmp_path):
    """librdkafka's in-process mock cluster: delivery reports served by the slot's polls."""
    wl = MockQueue()
    h = _run_slots(tmp_path, wl, concurrency=1, lanes=8, seconds=1.5)
    oks = [op for op in h.ops if op["type"] == "ok"]
    assert len(oks) > 200 and not h.incomplete
    assert all(op["type"] in ("invoke", "ok") for op in h.ops), "the mock cluster is healthy"
    # Idempotence keeps one producer's per-partition order: offsets follow invocation order.
    invoke_pos = {op["value"][0][2]: op["index"] for op in h.ops if op["type"] == "invoke"}
    by_key: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for op in oks:
        _, key, (offset, value) = op["value"][0]
        by_key[key].append((invoke_pos[value], offset))
    for pairs in by_key.values():
        offsets = [o for _, o in sorted(pairs)]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert len(wl.acked) == len(oks)


def test_timeouts_from_librdkafka_are_info_and_retire_lanes(tmp_path):
    """No broker answers: each send ends with librdkafka's message timeout, as info."""
    wl = MockQueue()

    def unreachable(producer: int, rng: random.Random) -> PipelinedProducer:
        conf = {
            "bootstrap.servers": "127.0.0.1:1",
            "message.timeout.ms": 300,
            "enable.idempotence": True,
        }
        return PipelinedProducer(wl, producer, rng, conf)  # type: ignore[arg-type]

    wl.producer_client = unreachable  # type: ignore[method-assign]
    wl.lanes = 3
    h = _run_slots(tmp_path, wl, concurrency=1, lanes=3, seconds=1.0)
    done = [op for op in h.ops if op["type"] != "invoke"]
    assert done and all(op["type"] == "info" for op in done)
    assert all("TIMED_OUT" in op["error"] or "in time" in op["error"] for op in done)
    # Each info retired its process: no process id completes twice.
    procs = [op["process"] for op in done]
    assert len(procs) == len(set(procs))


def test_spec_options_and_plans():
    plain = build_plan(RunSpec(), 7).to_json()
    assert build_plan(spec_from_dict({"send_mode": "sync"}), 7).to_json() == plain
    plan = build_plan(spec_from_dict({"send_mode": "async", "in_flight": 50}), 7)
    gen = json.loads(plan.to_json())["generator"]
    assert (gen["send_mode"], gen["in_flight"], gen["linger_ms"]) == ("async", 50, 5.0)
    assert "batch_size" not in gen and lanes_of(gen) == 50
    assert history_header(gen) == {"send_mode": "async", "in_flight": 50, "idempotence": True}
    assert history_header(json.loads(plain)["generator"]) == {}
    with pytest.raises(SpecError, match="--in-flight: only applies with --send-mode async"):
        spec_from_dict({"in_flight": 3})
    with pytest.raises(
        SpecError, match="--in-flight: must be a whole number between 1 and 1000000"
    ):
        spec_from_dict({"send_mode": "async", "in_flight": 0})
    with pytest.raises(SpecError, match="unknown send mode"):
        spec_from_dict({"send_mode": "fast"})


def test_pipelined_transactions_keep_one_process_per_slot_and_only_sends():
    spec = spec_from_dict({"send_mode": "async", "txn": True, "in_flight": 40})
    gen = json.loads(build_plan(spec, 7).to_json())["generator"]
    assert gen["mix"] == {"txn": 1} and gen["txn_sends"] == 40 and lanes_of(gen) == 1
    # Not the lanes' header: the ops are a sync transactional run's, each with many sends.
    assert history_header(gen) == {"txn_sends": 40}
    chooser = OpChooser(gen, 3, random.Random(1))
    ops = [chooser.next_op({}) for _ in range(50)]
    assert all(op.f == "txn" and 1 <= len(op.value) <= 40 for op in ops)
    assert all(m[0] == "send" for op in ops for m in op.value)
    values = [m[2] for op in ops for m in op.value]
    assert len(set(values)) == len(values) and min(values) > 3 * 10**9


# Drawn by QueueClient's own methods before they moved into OpChooser (commit 33e0868).
FIRST_OPS_SEED7_P2 = [
    ("assign", [0, 1, 2, 3, 4, 5, 6, 7]),
    ("txn", [["poll"], ["send", 7, 2000001], ["poll"]]),
    ("poll", [["poll"]]),
    ("txn", [["send", 1, 2000002], ["poll"], ["send", 7, 2000003]]),
]


def test_the_same_seed_draws_the_same_ops_as_before_the_chooser_was_shared():
    # The generator every queue client shares (workloads/queue_ops.py) draws as QueueClient did:
    # the assignment first, then each op's kind, its micro-ops, keys and values.
    gen = json.loads(build_plan(spec_from_dict({"txn": True}), 7).to_json())["generator"]
    chooser = OpChooser(gen, 2, random.Random("kchaos/7/client/2"))
    first = [chooser.assignment(), *(chooser.next_op({}) for _ in range(3))]
    assert [(op.f, op.value) for op in first] == FIRST_OPS_SEED7_P2


def test_the_cli_options_reach_the_plan():
    args = ["run", "--send-mode", "async", "--in-flight", "20", "--linger-ms", "2"]
    r = CliRunner().invoke(main, [*args, "--batch-size", "65536", "--seed", "3", "--plan-only"])
    assert r.exit_code == 0, r.output
    gen = json.loads(r.output)["generator"]
    assert (gen["in_flight"], gen["linger_ms"], gen["batch_size"]) == (20, 2.0, 65536)
