"""`kchaos run` as a child process, for tests that interrupt it the way a user does (Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.integration.kafka_io import wait_until

REPO = Path(__file__).parents[2]


def interrupted_run(
    args: list[str], what: str, ready: Callable[[], bool], timeout: float = 300
) -> tuple[int, str]:
    """Starts `kchaos run ARGS`, sends SIGINT once `ready()` holds, returns (exit code, output)."""
    cmd = [sys.executable, "-m", "harness.cli", "run", *args]
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_until(what, ready, timeout=timeout)
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out


def kchaos_process(args: list[str]) -> subprocess.Popen:
    """`kchaos ARGS` started as a user starts it, its output (stdout and stderr) in one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def client_host(pid: int) -> int:
    """The supervised child: a fork of `kchaos run`, so the same command line."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    mine = Path(f"/proc/{pid}/cmdline").read_bytes()
    forks = [int(c) for c in children if Path(f"/proc/{c}/cmdline").read_bytes() == mine]
    assert len(forks) == 1, f"expected one client host among {children}"
    return forks[0]
