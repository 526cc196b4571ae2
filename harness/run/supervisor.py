"""A run whose client host may die: the run proper in a child process, supervised.

Everything that hosts Kafka clients (librdkafka, a C library) runs in a forked child: bring-up,
setup, clients, observer, nemeses, final reads and the ending. A C-level abort there (an
assertion in librdkafka, a segfault) or a hang cannot be caught in the process that hosts it,
so the `kchaos run` process stays small and only supervises: it holds the cluster, relays the
child's messages, forwards Ctrl-C and SIGTERM to it, and, when the child dies without its
result or overruns its phase's budget, does the ending itself: heals every fault any nemesis
could have left (as `kchaos heal` does), keeps and checks the history recorded so far, collects
logs and metadata and tears the cluster down, and writes run.json with ``crashed``.

The child tells the supervisor where it is (``Run.on_state``): its phase and that phase's time
budget, whether it made the cluster, whether a history exists, and which ending steps it
already did, so that the supervisor redoes only what is missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clusters.errors import ClusterError
from harness.run.outcome import RunResult
from harness.run.recovery import recover
from harness.signals import handling

# The child's stderr, whole, in the run directory; its last lines in run.json.
STDERR_NAME = "client-host.stderr"
STDERR_TAIL_LINES = 40
# Python's stacks of every thread when the child dies of a fatal signal (faulthandler): which
# client call was in flight when native code aborted.
STACKS_NAME = "client-host.stacks"
# How long a child that was asked to stop (SIGTERM) gets before SIGKILL.
TERM_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


class Supervisable(Protocol):
    """What the supervisor uses of a run (harness/run/interpreter.py's Run)."""

    run_dir: Path | None
    summary: dict[str, Any]
    say: Any
    on_state: Any
    plan: Any
    spec: Any

    def prepare(self) -> Path: ...

    def run_here(self) -> RunResult: ...


@dataclass
class ChildState:
    """What the supervisor knows of the child, from its messages."""

    phase: str = "starting"
    budget_s: float | None = None
    phase_since: float = field(default_factory=time.monotonic)
    facts: dict[str, Any] = field(default_factory=dict)
    result: tuple[int, dict[str, Any]] | None = None
    error: BaseException | None = None

    def deadline(self) -> float | None:
        return None if self.budget_s is None else self.phase_since + self.budget_s


def run_supervised(run: Supervisable) -> RunResult:
    """Carries out ``run`` in a child process and returns its result, or the supervisor's own
    ending when the child died or hung."""
    run_dir = run.run_dir or run.prepare()
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    err_r, err_w = os.pipe()
    child = ctx.Process(target=_child_main, args=(run, sender, err_w), name="kchaos-client-host")
    started = time.monotonic()
    child.start()
    sender.close()
    os.close(err_w)
    tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
    tee = threading.Thread(
        target=_tee_stderr, args=(err_r, run_dir / STDERR_NAME, tail), daemon=True
    )
    tee.start()
    state = ChildState()
    hung: dict[str, Any] | None = None
    with _forwarding_signals(child):
        while True:
            if receiver.poll(0.25):
                try:
                    _take(receiver.recv(), state, run)
                except EOFError:
                    child.join()
                    break
                continue
            if not child.is_alive():
                child.join()
                break
            deadline = state.deadline()
            if deadline is not None and time.monotonic() > deadline:
                hung = {"phase": state.phase, "budget_s": state.budget_s}
                _stop(child)
                break
    # Messages sent just before the child ended are still in the pipe.
    while receiver.poll(0):
        try:
            _take(receiver.recv(), state, run)
        except EOFError:
            break
    receiver.close()
    tee.join(5.0)
    if state.result is not None and hung is None:
        return _finished(run, run_dir, state.result)
    if state.error is not None and hung is None:
        raise state.error
    crashed = _crash_record(child.exitcode, state, hung, list(tail))
    stack = _crashing_stack(run_dir / STACKS_NAME)
    if stack:
        crashed["python_stack"] = stack
    return recover(run, run_dir, state.facts, crashed, time.monotonic() - started)


def _finished(run: Supervisable, run_dir: Path, result: tuple[int, dict[str, Any]]) -> RunResult:
    code, summary = result
    run.summary = summary
    return RunResult(run_dir, run.plan.seed, code, summary)


def _take(message: tuple[Any, ...], state: ChildState, run: Supervisable) -> None:
    kind = message[0]
    if kind == "say":
        run.say(message[1])
    elif kind == "state":
        facts = message[1]
        if facts.get("phase") != state.phase:
            state.phase = facts.get("phase", state.phase)
            state.phase_since = time.monotonic()
        state.budget_s = facts.get("budget_s")
        state.facts = facts
    elif kind == "result":
        state.result = (message[1], message[2])
    elif kind == "error":
        state.error = message[1]


def _crash_record(
    exitcode: int | None, state: ChildState, hung: dict[str, Any] | None, tail: list[str]
) -> dict[str, Any]:
    """run.json's ``crashed``: how the child ended, in which phase, and its last stderr lines."""
    record: dict[str, Any] = {"where": state.phase, "stderr_tail": tail}
    if hung is not None:
        record["hang"] = {"budget_s": hung["budget_s"], "killed_by": "kchaos (over budget)"}
    if exitcode is not None and exitcode < 0:
        record["signal"] = signal.Signals(-exitcode).name
    else:
        record["exit"] = exitcode
    return record


def _crashing_stack(path: Path) -> list[str]:
    """The innermost frames of the thread that took the fatal signal, from faulthandler's dump
    (the whole dump stays in the file); [] when there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    if not text.strip():
        path.unlink(missing_ok=True)
        return []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Current thread"):
            frames = []
            for frame in lines[i + 1 :]:
                if not frame.strip():
                    break
                frames.append(frame.strip())
            return frames[:6]
    return []


# The child ---------------------------------------------------------------------------------
def _child_main(run: Supervisable, sender: Any, err_w: int) -> None:
    """The run proper. Its stderr (native code's too) goes to the supervisor's tee."""
    os.dup2(err_w, 2)
    os.close(err_w)
    assert run.run_dir is not None
    stacks = open(run.run_dir / STACKS_NAME, "w")  # noqa: SIM115 (open until the child ends)
    faulthandler.enable(file=stacks, all_threads=True)
    # Its own process group: the terminal's Ctrl-C reaches the supervisor only, which forwards
    # it once; otherwise both would get it, and a second interrupt ends a run's cleanup early.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _die_with_parent()
    # SIGTERM (a CI job stopping, or the supervisor's own stop) ends the run as Ctrl-C does:
    # healed, collected, kept.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    lock = threading.Lock()

    def send(*message: Any) -> None:
        # The supervisor gone, the run still ends cleanly on its own.
        with lock, contextlib.suppress(OSError, ValueError):
            sender.send(message)

    run.say = lambda m: send("say", m)
    run.on_state = lambda facts: send("state", facts)
    try:
        result = run.run_here()
        send("result", result.exit_code, result.summary)
    except BaseException as exc:  # every ending is reported; the supervisor decides
        send("error", _portable(exc))
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()


def _portable(exc: BaseException) -> BaseException:
    """``exc`` itself when it survives pickling, else the nearest error the CLI understands,
    carrying the child's traceback for kchaos's own bugs."""
    try:
        again = pickle.loads(pickle.dumps(exc))
        if type(again) is type(exc) and str(again) == str(exc):
            return again
    except Exception:
        pass
    if isinstance(exc, ClusterError):
        return ClusterError(str(exc))
    if isinstance(exc, KeyboardInterrupt):
        return KeyboardInterrupt()
    text = "".join(traceback.format_exception(exc))
    return RuntimeError(f"the run failed in its client host:\n{text}")


def _die_with_parent() -> None:
    """If the supervisor is SIGKILLed, the child gets SIGTERM and ends the run itself."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass


# The supervisor's side -----------------------------------------------------------------------
def _forwarding_signals(child: multiprocessing.process.BaseProcess):
    """Ctrl-C and SIGTERM go to the child, which ends the run as it would in one process."""

    def forward(signum: int, _frame: Any) -> None:
        if child.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signum)

    return handling(forward)


def _stop(child: multiprocessing.process.BaseProcess) -> None:
    """A hung child: SIGTERM (its own ending may still run), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        child.terminate()
    child.join(TERM_GRACE_S)
    if child.is_alive():
        child.kill()
        child.join()


def _tee_stderr(fd: int, path: Path, tail: deque[str]) -> None:
    """The child's stderr to ours (so the user still sees it), to a file, and its last lines."""
    pending = b""
    with open(path, "ab") as keep, os.fdopen(fd, "rb", buffering=0) as src:
        while chunk := src.read(65536):
            keep.write(chunk)
            keep.flush()
            _write_err(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            tail.extend(line.decode("utf-8", "replace") for line in lines)
        if pending:
            tail.append(pending.decode("utf-8", "replace"))
    if path.stat().st_size == 0:
        path.unlink()


def _write_err(chunk: bytes) -> None:
    try:
        buffer = getattr(sys.stderr, "buffer", None)
        if buffer is not None:
            buffer.write(chunk)
        else:
            sys.stderr.write(chunk.decode("utf-8", "replace"))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
