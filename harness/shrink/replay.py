"""The search's runner for real: each try is ``kchaos run --replay`` of the candidate's plan.json.

The same command a person runs to replay a plan, in its own process and session (as a campaign
runs a cell): a native crash, a hang or a cluster that never comes up is that try's verdict,
and the shrink goes on. The try is a normal run directory, ``<shrink dir>/<candidate>/<stamp>-
<seed>/`` (``--results-dir`` the shrink's folder, ``--name`` the candidate's id), on the cluster
and subnet the shrink was given. Ctrl-C is passed on to the run, which heals and keeps its
history as it always does, and then stops the shrink.

With a ``lock`` file (``kchaos shrink --lock``, ``KCHAOS_LOCK``) each try holds an exclusive
flock(2) on it for its run only, the lock ``flock FILE CMD`` takes: a long search on a machine
whose Docker is shared lets others' jobs in between its tries instead of holding it for hours.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.exit_codes import CRASHED_RUN_EXIT
from harness.plan import Plan
from harness.shrink.search import Attempt

REPO = Path(__file__).resolve().parents[2]
STATUS_OF_EXIT = {0: "valid", 1: "invalid", 2: "unknown", CRASHED_RUN_EXIT: "crashed"}
# After SIGTERM (or Ctrl-C passed on) a run heals, collects and checks; past this it is killed.
STOP_GRACE_S = 180.0
# Beyond a run's own time limit: bring-up, final reads, collection and the check.
OVERHEAD_S = 900.0
LOCK_POLL_S = 0.5


def failing_kinds(results: dict[str, Any]) -> list[str]:
    """The kinds of a check's failing findings (not tolerated, not unknown), sorted."""
    return sorted(
        {
            str(f.get("kind"))
            for f in results.get("findings") or ()
            if isinstance(f, dict) and f.get("tolerated") is None and not f.get("unknown")
        }
    )


def summaries(results: dict[str, Any], limit: int = 5) -> list[str]:
    out = []
    for f in results.get("findings") or ():
        if isinstance(f, dict) and f.get("tolerated") is None and not f.get("unknown"):
            out.append(f"[{f.get('kind')}] {f.get('explanation', '')}"[:300])
    return out[:limit]


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


class ReplayRunner:
    """``Runner`` for harness/shrink/search.py: one ``kchaos run --replay`` per call."""

    def __init__(
        self,
        directory: Path,
        cluster: str | None,
        subnet: str | None,
        cli: list[str] | None = None,
        log: Any = None,
        lock: Path | None = None,
    ) -> None:
        self.directory = directory
        self.cluster = cluster
        self.subnet = subnet
        self.cli = cli or [sys.executable, "-m", "harness.cli"]
        self.log = log
        self.lock = lock

    def __call__(self, plan: Plan, folder: Path | None) -> Attempt:
        assert folder is not None and (folder / "plan.json").is_file()
        name = folder.name
        before = set(_run_dirs(folder))
        command = [
            *self.cli,
            "run",
            "--replay",
            str(folder),
            "--name",
            name,
            "--results-dir",
            str(self.directory),
        ]
        # None: the plan's own (a run on SSH hosts takes the inventory's name and addresses).
        if self.cluster is not None:
            command += ["--cluster", self.cluster]
        if self.subnet is not None:
            command += ["--subnet", self.subnet]
        limit = float(plan.spec.get("time_limit") or 30.0)
        n = len(list(folder.glob("try-*.log"))) + 1
        why = None
        with _held(self.lock), open(folder / f"try-{n}.log", "wb") as log:
            started = time.monotonic()  # the run's own time, not the wait for the lock
            proc = subprocess.Popen(
                command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                code: int | None = proc.wait(timeout=3 * limit + OVERHEAD_S)
            except subprocess.TimeoutExpired:
                why = "timeout"
                code = _stop(proc, signal.SIGTERM)
            except KeyboardInterrupt:
                _stop(proc, signal.SIGINT)
                raise
        seconds = round(time.monotonic() - started, 1)
        new = [d for d in _run_dirs(folder) if d not in before]
        run_dir = new[-1] if new else None
        results = read_json(run_dir / "results.json") if run_dir else {}
        status = why or STATUS_OF_EXIT.get(code, "error")
        return Attempt(
            status=status,
            kinds=failing_kinds(results),
            run_dir=str(run_dir.relative_to(self.directory)) if run_dir else None,
            seconds=seconds,
            summaries=summaries(results),
        )


@contextlib.contextmanager
def _held(lock: Path | None) -> Any:
    """An exclusive flock(2) on ``lock`` while the block runs (none without one). Taken by a
    blocking flock, in line with the other waiters, but in a thread of its own: a Ctrl-C the
    kernel hands to another thread does not interrupt a blocked flock(2), and the shrink must
    stop while it waits (the abandoned thread's lock, if it gets it, goes with the file)."""
    if lock is None:
        yield
        return
    with open(lock, "a") as f:
        taken = threading.Event()

        def take() -> None:
            fcntl.flock(f, fcntl.LOCK_EX)
            taken.set()

        threading.Thread(target=take, name="shrink-lock", daemon=True).start()
        while not taken.wait(LOCK_POLL_S):
            pass
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run_dirs(folder: Path) -> list[Path]:
    return sorted(p.parent for p in folder.glob("*/run.json"))


def _stop(proc: subprocess.Popen, first: int) -> int | None:
    """``first`` (SIGINT: as Ctrl-C stops a run; SIGTERM), then SIGKILL of its session."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(first)
    try:
        return proc.wait(timeout=STOP_GRACE_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()
