"""The fault phases of bench/bench_throughput.py --kill, on hand-made histories and samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.bench_throughput import LeaderKill, history_phases, perf_phases

S = 1_000_000_000


def _write(path: Path, ops: list[dict[str, object]]) -> Path:
    lines = [json.dumps({"kchaos_history": 1})]
    lines += [json.dumps({"index": i, **op}) for i, op in enumerate(ops)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _send(kind: str, t: float, process: int = 0) -> dict[str, object]:
    return {"type": kind, "f": "send", "process": process, "time": int(t * S)}


def _nemesis(f: str, t: float, value: dict[str, object]) -> dict[str, object]:
    return {"type": "ok", "f": f, "process": "nemesis", "time": int(t * S), "value": value}


def test_history_phases_split_at_the_nemesis_completions(tmp_path: Path) -> None:
    ops = [_send("invoke", 0.0)]
    # 10 oks a second for 10 s, then 2 during the kill, then a gap of 1.5 s after the restart.
    ops += [_send("ok", 0.1 * i) for i in range(1, 100)]
    ops.append(_nemesis("start-kill", 10.0, {"targets": ["n2"], "signal": "SIGKILL"}))
    ops += [_send("ok", 12.0), _send("ok", 15.0)]
    ops.append(_nemesis("stop-kill", 20.0, {"restarted": ["n2"]}))
    ops += [_send("ok", 21.5), _send("ok", 30.0)]
    got = history_phases(_write(tmp_path / "history.jsonl", ops))
    assert got["node"] == "n2"
    assert (got["kill_s"], got["restart_s"]) == (10.0, 20.0)
    assert got["before_ok_per_s"] == 9.9
    assert got["during_ok_per_s"] == 0.2
    assert got["after_ok_per_s"] == 0.2
    assert got["first_ok_after_restart_s"] == 1.5
    assert got["longest_ok_gap_s"] == 8.5


def test_history_without_a_kill_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no kill"):
        history_phases(_write(tmp_path / "history.jsonl", [_send("invoke", 0), _send("ok", 1)]))


def test_perf_phases_from_window_lines_and_high_watermark_growth() -> None:
    kill = LeaderKill("c", 0.0, 10.0, 20.0)
    kill.killed, kill.restarted = 10.0, 20.0
    # High watermarks: 100 a second until the kill, none until 23 s, then 100 a second again.
    hw = [(t * 1.0, 100 * t) for t in range(11)]
    hw += [(t * 1.0, 1000) for t in range(11, 23)]
    hw += [(t * 1.0, 1000 + 100 * (t - 22)) for t in range(23, 31)]
    # Window lines every 5 s: 500 records each, but none in the one from 10 s to 15 s.
    lines = [(5.0, 400), (10.0, 500), (15.0, 0), (20.0, 500), (25.0, 500), (30.0, 500)]
    got = perf_phases(hw, lines, 0.0, kill, 30.0)
    # The first window (the JVM's start) is left out; each window's records spread evenly.
    assert got["before_ok_per_s"] == 100.0
    assert got["during_ok_per_s"] == 50.0
    assert got["after_ok_per_s"] == 100.0
    assert got["high_watermark_ok_per_s"]["before_ok_per_s"] == 100.0
    assert got["first_ok_after_restart_s"] == 3.0
    assert got["longest_ok_gap_s"] == 13.0
    assert got["window_lines"][0] == {"at_s": 5.0, "records": 400}
