"""The Java client's final reads in its JVM (workloads/java_final.py, java/KchaosFinal.java)
without a cluster: a poll's records as the JVM writes them build the history's own poll op
(records grouped by key, in the order read; a poll longer than the writer's buffers whole), and
the loop against no broker writes invoke/ok pairs of one process, stops at its budget, builds
into a history the reader takes, and answers with the outcome's usual shape."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from history.build import build, build_run
from history.format import JSONL_NAME, JVM_SENDS_DIR
from history.reader import read_history
from history.sidefiles import POLLS_TAG, open_side
from history.writer import HistoryWriter
from tests.unit.workloads.test_java_recorded import _dist, needs_jdk
from workloads import java_final
from workloads.java_final import FINAL_SIDE_FILE, WANTED_FILE, final_reads_java
from workloads.java_host import JavaHost, compiled
from workloads.readback import AckedSends

_LINES = """
public class FinalLines {
    public static void main(String[] a) throws Exception {
        SideWriter w = new SideWriter(a[0], "t", SideWriter.POLLS, KchaosFinal.RECORD);
        int[] parts = {0, 0, 3, 1};
        long[] offs = {0, 1, 9, 4};
        long[] vals = {11, 12, 1000000013, 7};
        synchronized (w) {
            invoke(w, 4, 7);
            KchaosFinal.writeOk(w, 5, 7, 1700000000123456789L, parts, offs, vals, 4);
            invoke(w, 5, 7);
            KchaosFinal.writeOk(w, 6, 7, 1700000000000000000L, parts, offs, vals, 0);
            int n = 100000;  // 3.2 MB: longer than both of the writer's 1 MB buffers
            int[] p = new int[n];
            long[] o = new long[n];
            long[] v = new long[n];
            for (int i = 0; i < n; i++) { p[i] = i * 4 / n; o[i] = i; v[i] = 5000000000L + i; }
            invoke(w, 7, 9);
            KchaosFinal.writeOk(w, 8, 9, 1700000001000000000L, p, o, v, n);
        }
        w.close();
    }

    static void invoke(SideWriter w, long time, long process) throws Exception {
        w.reserve();
        KchaosFinal.record(w, KchaosFinal.OP, KchaosFinal.INVOKE, time, 1700000000000000L,
            process, -1);
        w.reserve();
    }
}
"""


@needs_jdk
def test_a_final_polls_records_are_the_historys_poll_op(tmp_path: Path):
    dist = _dist()
    classes = compiled(dist)
    (tmp_path / "FinalLines.java").write_text(_LINES)
    cp = f"{classes}:{dist.host_classpath()}"
    subprocess.run(
        ["javac", "-nowarn", "-cp", cp, "-d", str(tmp_path), str(tmp_path / "FinalLines.java")],
        check=True,
    )
    out = tmp_path / "final.ops"
    subprocess.run(["java", "-cp", f"{tmp_path}:{cp}", "FinalLines", str(out)], check=True)
    side = open_side(out)
    assert side.tag == POLLS_TAG and not side.torn and side.count == 3 + 4 + 1 + 1 + 100_000 + 1
    header = {"kchaos_history": 1, "run": "t"}
    (tmp_path / JSONL_NAME).write_text(json.dumps(header) + "\n")
    build(tmp_path / JSONL_NAME, [side], tmp_path / "h.parquet")
    ops = read_history(tmp_path / "h.parquet").ops
    oks = [op for op in ops if op["type"] == "ok"]
    first, empty, big = ({k: v for k, v in op.items() if k != "index"} for op in oks)
    assert first == {
        "time": 5,
        "type": "ok",
        "f": "poll",
        "value": [["poll", {"0": [[0, 11], [1, 12]], "3": [[9, 1000000013]], "1": [[4, 7]]}]],
        "process": 7,
        "wall": 1700000000.123456,
        "node": None,
    }
    assert empty["value"] == [["poll", {}]] and empty["time"] == 6
    polled = big["value"][0][1]
    assert sorted(polled) == ["0", "1", "2", "3"]
    assert sum(len(v) for v in polled.values()) == 100_000
    assert polled["2"][0] == [50_000, 5_000_050_000]


class _Side:
    """The recorder's side of the final reads (workloads/api.py SideRecorder)."""

    def __init__(self, side_dir: Path, t0_ns: int) -> None:
        self.side_dir = side_dir
        self.t0_ns = t0_ns
        self.counts: dict[str, int] = {}

    def add_counts(self, counts: dict[str, int]) -> None:
        for k, n in counts.items():
            self.counts[k] = self.counts.get(k, 0) + n


def _wl(acked: list[tuple[int, int]]) -> Any:
    sends = AckedSends()
    for k, v in acked:
        sends.add(k, v)
    gen = {"txn": False, "poll_max_messages": 64}
    return SimpleNamespace(
        acked=sends, keys=3, topic="t", run_id="r/1", gen=gen, bootstrap="127.0.0.1:1"
    )


@needs_jdk
def test_the_jvms_final_reads_without_a_broker_stop_at_their_budget(tmp_path: Path, monkeypatch):
    """No broker answers: the end offsets are unknown (-1), every poll is empty and ok, and
    the reads stop at their budget with every acknowledged send missing, named in order."""
    dist = _dist()
    run = tmp_path / "run"
    run.mkdir()
    side_dir = run / JVM_SENDS_DIR
    acked = [(2, 30), (0, 12), (0, 11), (1, 5), (0, 11)]  # a repeat counts once
    with HistoryWriter(run / JSONL_NAME, "t", header={}) as w:
        t0 = time.monotonic_ns()
        side = _Side(side_dir, t0)
        ids = iter(range(40, 100))
        host = JavaHost(dist)
        try:
            # No broker answers the end offsets' request: not worth waiting 5 s for here.
            monkeypatch.setattr(java_final, "ENDS_MS", 200)
            outcome = final_reads_java(_wl(acked), host, lambda: next(ids), side, 3.0)
        finally:
            host.close()
        for type_ in ("invoke", "ok"):
            w.append({"type": type_, "f": "observe", "value": None, "process": "observer",
                      "time": time.monotonic_ns() - t0})  # fmt: skip
    assert set(outcome) == {
        "acknowledged", "read_acknowledged", "missing", "complete", "polls", "seconds",
        "high_watermarks",
    }  # fmt: skip
    assert outcome["acknowledged"] == 4 and outcome["read_acknowledged"] == 0
    assert outcome["missing"] == [[0, 11], [0, 12], [1, 5], [2, 30]]
    assert outcome["complete"] is False
    assert outcome["high_watermarks"] == {"0": -1, "1": -1, "2": -1}
    assert side.counts == {"ok": outcome["polls"], "info": 0}
    assert (side_dir / FINAL_SIDE_FILE).exists() and not (side_dir / WANTED_FILE).exists()
    build_run(run)
    history = read_history(run)
    polls = [op for op in history.ops if op["f"] == "poll"]
    assert len(polls) == 2 * outcome["polls"]
    assert [op["type"] for op in polls] == ["invoke", "ok"] * outcome["polls"]
    assert all(op["process"] == 40 and op["node"] is None for op in polls)
    assert all(op["value"] == [["poll", {}]] for op in polls if op["type"] == "ok")
    # Written on the history's clock: before the observer's op that came after them.
    assert history.ops[-1]["process"] == "observer"
    assert not history.incomplete and history.notes() == []
    assert np.all(np.diff([op["time"] for op in history.ops]) >= 0)
