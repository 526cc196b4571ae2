"""Sends recorded in the Java client's JVM (workloads/java_recorded.py, java/KchaosRecorded.java)
without a cluster: the JVM's random stream is Python's, its clock is the recorder's, and a
recorded slot's side file (sends refused before queueing: no broker answers) holds the history's
own ops as binary records, lanes, producer ids and values as the harness's path makes them,
builds into a history the reader takes, and survives its harness going away."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from clusters.kafka_dist import load_dist
from harness.plan import client_rng, client_rng_prefix
from history.build import build_run
from history.format import JSONL_NAME, JVM_SENDS_DIR
from history.reader import read_history
from history.sidefiles import SENDS_TAG, open_side
from history.writer import HistoryWriter
from workloads.java_client import DEFINITE_SEND
from workloads.java_host import SOURCES, JavaHost
from workloads.java_recorded import check_clock, read_acked, record_args
from workloads.pipelined import SlotSetup

needs_jdk = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")


def _dist():
    for version in ("4.4.0", "4.1.2", "3.9.2", "3.9.1", "3.8.1"):
        dist = load_dist(version)
        if dist is not None:
            return dist
    pytest.skip("no Kafka release assembled (make setup assembles one)")


@needs_jdk
def test_the_jvms_random_stream_is_pythons(tmp_path: Path):
    """PyRandom.java draws randrange(n) as random.Random(seed string) does: a JVM-recorded
    producer sends to the keys the harness-recorded one of the same seed and id would."""
    (tmp_path / "Draw.java").write_text(
        "public class Draw { public static void main(String[] a) {"
        " PyRandom r = new PyRandom(a[0]); int n = Integer.parseInt(a[1]);"
        " StringBuilder sb = new StringBuilder();"
        " for (int i = 0; i < 300; i++) sb.append(r.randrange(n)).append(' ');"
        " System.out.println(sb.toString().trim()); } }"
    )
    subprocess.run(
        ["javac", "-d", str(tmp_path), str(SOURCES / "PyRandom.java"), str(tmp_path / "Draw.java")],
        check=True,
    )
    for seed, producer, n in [(1, 0, 8), (7, 3, 1), (2**62, 41, 1000), (0, 5, 2**31 - 1)]:
        got = subprocess.run(
            ["java", "-cp", str(tmp_path), "Draw", client_rng_prefix(seed) + str(producer), str(n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        rng = client_rng(seed, producer)
        assert [int(x) for x in got] == [rng.randrange(n) for _ in range(300)]


def test_acknowledged_sends_are_read_back_and_a_torn_triple_left_out(tmp_path: Path):
    path = tmp_path / "slot0.acked"
    rows = np.array([[3, 17, 1_000_000_001], [0, -1, 1_000_000_002]], dtype="<i8")
    path.write_bytes(rows.tobytes() + b"\x01\x02\x03")
    assert read_acked(path) == [(3, 17, 1_000_000_001), (0, None, 1_000_000_002)]
    assert read_acked(tmp_path / "none.acked") == []


class _Wl:
    def __init__(self, bootstrap: str = "127.0.0.1:1") -> None:
        self.gen = {"value_stride": 1_000_000_000, "linger_ms": 5.0}
        self.keys = 4
        self.topic = "t"
        self.bootstrap = bootstrap
        self.leaders = SimpleNamespace(leaders={0: "n1", 2: "n3"})
        self.acked: list[Any] = []

    def acked_bulk(self, keys: np.ndarray, values: np.ndarray) -> None:
        self.acked.extend(zip(keys.tolist(), values.tolist(), strict=True))


def _setup(side: Path, t0: int, lanes: int = 2) -> SlotSetup:
    return SlotSetup(
        side_dir=side,
        t0_ns=t0,
        seed_prefix=client_rng_prefix(5),
        concurrency=2,
        lanes=lanes,
        interval_s=0.0,
        start_delay_s=0.0,
        drain_s=1.0,
    )


def test_the_slots_settings_and_the_producers_travel_in_one_request(tmp_path: Path):
    args = dict(a.split("=", 1) for a in record_args(_Wl(), 1, _setup(tmp_path, 42, lanes=7)))
    assert args["kchaos.slot"] == "1" and args["kchaos.lanes"] == "7"
    assert args["kchaos.concurrency"] == "2" and args["kchaos.t0_ns"] == "42"
    assert args["kchaos.seed_prefix"] == "kchaos/5/client/"
    assert set(args["kchaos.definite"].split(",")) == DEFINITE_SEND
    # The harness path's pipelined producer, as is.
    assert args["acks"] == "all" and args["enable.idempotence"] == "true"
    assert args["linger.ms"] == "5"


def _record(host: JavaHost, side: Path, t0: int) -> int:
    h = host.handle()
    host.call("leaders", 0, "n1,,n3,", timeout=15)
    # No broker answers: each send() waits max.block.ms for metadata, then is refused before
    # its record was queued (a definite fail, its lane not retired).
    args = [*record_args(_Wl(), 0, _setup(side, t0)), "max.block.ms=150"]
    assert host.call("record", h, *args, timeout=60) is True
    return h


@needs_jdk
def test_a_recorded_slot_writes_the_historys_own_lines(tmp_path: Path):
    dist = _dist()
    run = tmp_path / "run"
    run.mkdir()
    side = run / JVM_SENDS_DIR
    with HistoryWriter(run / JSONL_NAME, "t", header={"send_mode": "async"}) as w:
        t0 = time.monotonic_ns()
        host = JavaHost(dist)
        try:
            check_clock(host)
            w.append({"type": "invoke", "f": "start-kill", "value": None, "process": "nemesis",
                      "time": time.monotonic_ns() - t0})  # fmt: skip
            h = _record(host, side, t0)
            # Each send is refused after max.block.ms; on a loaded box that takes longer, so
            # wait for three refusals rather than a fixed time.
            deadline = time.monotonic() + 60
            stats = host.call("rstats", h, timeout=15)
            while stats["fail"] < 3 and time.monotonic() < deadline:
                time.sleep(0.1)
                stats = host.call("rstats", h, timeout=15)
            assert stats["running"] is True and stats["highest"] == 1
            final = host.call("rstop", h, timeout=60)
        finally:
            host.close()
        w.append({"type": "ok", "f": "start-kill", "value": {}, "process": "nemesis",
                  "time": time.monotonic_ns() - t0})  # fmt: skip
    written = open_side(side / "slot0.ops")
    assert written.tag == SENDS_TAG and written.count >= 6 and not written.torn
    build_run(run)
    history = read_history(run)
    sends = [op for op in history.ops if op["f"] == "send"]
    assert final["invoke"] == final["fail"] == len(sends) // 2 >= 3
    assert final["ok"] == final["info"] == 0
    # The nemesis op's invocation was written before the slot began, its completion after
    # the slot ended: the JVM's times lie between them on the history's clock.
    nemesis = [op for op in history.ops if op["process"] == "nemesis"]
    assert history.ops[0] is nemesis[0] and history.ops[-1] is nemesis[1]
    invokes = [op for op in sends if op["type"] == "invoke"]
    # Producer 0's n-th value is n, its keys Python's own stream for that producer.
    rng = random.Random(client_rng_prefix(5) + "0")
    assert [op["value"] for op in invokes] == [
        [["send", rng.randrange(4), n]] for n in range(1, len(invokes) + 1)
    ]
    for op in sends:
        assert op["producer"] == 0 and op["process"] in (0, 1)  # slot 0's lanes; none retired
        assert op["node"] == {0: "n1", 2: "n3"}.get(op["value"][0][1])
        assert isinstance(op["wall"], float) and abs(op["wall"] - time.time()) < 60
    for op in sends:
        if op["type"] == "fail":
            assert op["error"].startswith("retriable: TimeoutException:"), op["error"]
            assert op["value"] == history.ops[history.invoke_of[op["index"]]]["value"]
    assert not history.incomplete and history.notes() == []


@needs_jdk
def test_a_jvm_whose_harness_goes_away_leaves_whole_lines(tmp_path: Path):
    """The client host died: the JVM's stdin closes, and it writes out what it buffered before
    it exits, so the build a recovery does keeps every send recorded so far."""
    dist = _dist()
    side = tmp_path / JVM_SENDS_DIR
    host = JavaHost(dist)
    _record(host, side, time.monotonic_ns())
    time.sleep(0.8)
    host.close()  # stdin closed, no rstop
    written = open_side(side / "slot0.ops")
    assert written.count and not written.torn
    assert written.read(0, 1)["type"][0] == 0  # an invocation first
    # Its error texts, each a JSON string named before any record names it.
    assert all(
        isinstance(json.loads(x), str) for x in (side / "slot0.strings").read_bytes().splitlines()
    )
