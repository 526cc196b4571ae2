"""A run killed with SIGKILL leaves a history that reads back up to its last complete line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from history.reader import read_history

# Writes like a run does: several threads (clients, observer) through one Recorder, no pauses.
WRITER = r"""
import sys, threading
from pathlib import Path
from harness.run.recorder import Recorder

rec = Recorder(Path(sys.argv[1]), "crash/test")

def client(p):
    n = 0
    while True:
        n += 1
        rec.invoke("send", [["send", n % 8, p * 1_000_000 + n]], p)
        rec.ok("send", [["send", n % 8, [n, p * 1_000_000 + n]]], p, node="n1")

def observer():
    while True:
        rec.invoke("observe", None, "observer", "n2")
        rec.ok("observe", {"raft": None}, "observer", "n2")

for p in range(4):
    threading.Thread(target=client, args=(p,), daemon=True).start()
observer()
"""


ALL = {0, 1, 2, 3, "observer"}


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _processes(path: Path) -> set:
    """The processes with an op among the complete lines written so far."""
    history = read_history(path)
    return {op["process"] for op in history.ops}


def test_sigkill_mid_run_leaves_a_readable_history(tmp_path):
    path = tmp_path / "history.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], cwd=Path(__file__).parents[3]
    )
    try:
        deadline = time.monotonic() + 60
        while _lines(path) < 5000:
            assert proc.poll() is None, "the writer died on its own"
            assert time.monotonic() < deadline, "the writer wrote too little"
            time.sleep(0.05)
        # On a loaded machine two threads can write the first 5000 lines before the others get
        # the GIL; the kill must land while every writer is writing, so wait to see them all.
        while _processes(path) != ALL:
            assert proc.poll() is None, "the writer died on its own"
            assert time.monotonic() < deadline, "not every writer got to write"
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    history = read_history(path)
    assert len(history.ops) >= 4999
    assert [op["index"] for op in history.ops] == list(range(len(history.ops)))
    times = [op["time"] for op in history.ops]
    assert times == sorted(times), "time must not go backwards in file order"
    # Killed between invoke and completion: at most one open invocation per process.
    assert len(history.incomplete) <= 5
    assert {op["process"] for op in history.ops} == ALL
