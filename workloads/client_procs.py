"""Clients in OS processes of their own, so that a fault can pause or kill one client alone
(nemesis/targets.py ``ClientProcess``; the generator's ``client_procs`` asks for it).

A worker slot's client runs in a child interpreter (``python -m workloads.client_procs``), a
fresh one, never a fork of the threaded client host. The slot's thread keeps everything else:
it draws the ops, records each invocation and completion in the client host's one Recorder (so
the history's order and indexes are as with clients in threads), and sends the child one op at
a time; the child runs the client's own code for it and answers with the completion. What the
child serves is built by a factory its first message names (``module:function``), so this
module knows nothing of Kafka.

What a fault does to the child, as the slot's thread sees it:
- paused (SIGSTOP): no answer; past the op's deadline (what the client's own timeouts add up
  to) the op is unknown, ``ChildSilent``, and the slot retires the process and kills it. Resumed
  in time, the answer simply comes late, as a real paused client's would.
- killed (SIGKILL): the pipe ends, ``ChildGone``; the op is unknown and the slot goes on as a
  new process with a new child.
- held (``hold(point)``): the child blocks just before its next ``point`` call (``Gate.at``)
  and says so; the deadline stops counting until the point is released.

A child dies with the client host: it asks the kernel for SIGKILL when its parent dies
(PR_SET_PDEATHSIG, which reaches a stopped process too) and exits when its stdin closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from clusters.client_net import ClientNet

# The generator field that asks for clients in processes of their own (a bool; absent: threads),
# read by the Java and the librdkafka clients alike.
CLIENT_PROCS = "client_procs"
# The generator field that asks for each slot's client in a network of its own besides (a bool;
# clusters/client_net.py): the harness then gives the workload ``client_nets``.
CLIENT_NETS = "client_nets"
# nemesis/targets.py's hint names (workloads/ may not import nemesis/; a test keeps them equal).
CLIENT_PROCS_HINT = "client_processes"
CLIENT_TIMEOUTS_HINT = "client_timeouts"
# The points a client may be held at (nemesis/targets.py ClientProcess.hold): just before a
# producer's send, a transaction's commit, a transaction's abort.
SEND, COMMIT, ABORT = "send", "commit", "abort"
HOLD_POINTS = (SEND, COMMIT, ABORT)


def wants_processes(gen: dict[str, Any]) -> bool:
    """Does the run's generator ask for each slot's client in a process of its own?"""
    return bool(gen.get(CLIENT_PROCS))


def wants_networks(gen: dict[str, Any]) -> bool:
    """Does the run's generator ask for each slot's client in a network of its own?"""
    return bool(gen.get(CLIENT_NETS))


def net_prefix(nets: Mapping[int, ClientNet] | None, slot: int) -> list[str]:
    """What a slot's client process is started behind: its network's entry (clusters/
    client_net.py), or nothing where the run gives none."""
    net = (nets or {}).get(slot)
    return net.prefix() if net is not None else []


# A fresh interpreter importing a Kafka client takes about half a second on two busy cores.
START_TIMEOUT_S = 60.0
# How long a closing child gets to close its client (a group member leaves its group) before
# it is killed.
CLOSE_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1
_F_SETPIPE_SZ = 1031
# A pipelined producer's sends in flight are frames in its child's stdin while it is paused:
# Linux's largest pipe by default (/proc/sys/fs/pipe-max-size) holds a few thousand.
_PIPE_BYTES = 1 << 20
# How long a write to a child waits for room in its pipe (a paused child reads nothing).
WRITE_TIMEOUT_S = 30.0
_ROOT = Path(__file__).resolve().parents[1]
_LEN = struct.Struct(">I")
# How long an idle child's client waits for its own work (delivery reports) at a time.
IDLE_S = 0.01


class ChildGone(Exception):
    """The child's pipe ended (killed, or it died): what it was doing has an unknown outcome."""


class ChildSilent(Exception):
    """The child gave no answer by the op's deadline (paused, or stuck)."""


class ChildFailed(RuntimeError):
    """The child could not build its client, or its code raised: the message is its story."""


# Framing: a 4-byte length, then a pickle (both ends are this module, on one machine).
def frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


def write_frame(out: BinaryIO, message: Any) -> None:
    out.write(frame(message))
    out.flush()


class FrameReader:
    """Whole frames off a pipe's fd, each read bounded by a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = b""

    def _frame(self) -> Any | None:
        if len(self._buf) < _LEN.size:
            return None
        (n,) = _LEN.unpack_from(self._buf)
        if len(self._buf) < _LEN.size + n:
            return None
        data, self._buf = self._buf[_LEN.size : _LEN.size + n], self._buf[_LEN.size + n :]
        return pickle.loads(data)

    def read(self, until: float | None) -> Any | None:
        """The next message; None when `until` (monotonic s; None: no bound) came first.
        EOFError when the pipe ended."""
        while True:
            got = self._frame()
            if got is not None:
                return got
            if until is not None:
                ready, _, _ = select.select([self.fd], [], [], max(0.0, until - time.monotonic()))
                if not ready:
                    return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError
            self._buf += chunk


# The parent's side -------------------------------------------------------------------------------
class ChildProcess:
    """One child interpreter serving one client; driven by one thread (``call``, ``close``),
    held and released from any (``hold``, ``release``)."""

    def __init__(
        self,
        factory: str,
        config: dict[str, Any],
        held: str | None = None,
        start_timeout: float = START_TIMEOUT_S,
        prefix: list[str] | None = None,
    ) -> None:
        """`prefix`: what the child is started behind (its slot's network, net_prefix)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
        # Fork and exec, no preexec_fn (unsafe in a threaded parent): the child sets itself up.
        self.proc = subprocess.Popen(
            [*(prefix or ()), sys.executable, "-m", "workloads.client_procs", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        self.pid = self.proc.pid
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._fd = self._in.fileno()
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._fd, _F_SETPIPE_SZ, _PIPE_BYTES)
        # Writes wait for room with a deadline (``_write``), never blocked on a paused child.
        os.set_blocking(self._fd, False)
        self._reader = FrameReader(self.proc.stdout.fileno())
        self._lock = threading.Lock()  # writes come from the slot's thread and a nemesis's
        self.held_s = 0.0  # the last call's time held at a point
        # Set while the child says it waits at a held point (its op is past nothing after it).
        self.holding = threading.Event()
        try:
            self._write(("init", factory, config, held))
            said = self._reader.read(time.monotonic() + start_timeout)
        except (EOFError, OSError):
            said = ("failed", f"the client process ended at start: {self.exit_reason()}")
        if said is None:
            self.kill()
            raise ChildFailed(f"the client process did not start in {start_timeout:g} s")
        if said[0] != "ready":
            self.kill()
            raise ChildFailed(said[1])

    def _write(self, message: Any, timeout: float = WRITE_TIMEOUT_S) -> None:
        """One whole frame into the child's pipe; ChildSilent when no room came in `timeout`
        (the frame may be cut: the child is then past use, and killed)."""
        data = memoryview(frame(message))
        until = time.monotonic() + timeout
        with self._lock:
            while data:
                try:
                    n = os.write(self._fd, data)
                except BlockingIOError:
                    n = 0
                data = data[n:]
                if not data:
                    return
                _, room, _ = select.select([], [self._fd], [], max(0.0, until - time.monotonic()))
                if not room:
                    raise ChildSilent(f"client process {self.pid} read nothing in {timeout:g} s")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, method: str, arg: Any, timeout: float) -> Any:
        """What the child's client's `method(arg)` returned. ChildSilent past `timeout`
        seconds of not being held, ChildGone when the child died, ChildFailed when the
        method raised."""
        try:
            self._write(("call", method, arg))
        except (BrokenPipeError, ValueError, OSError):
            raise ChildGone(self.exit_reason()) from None
        until = time.monotonic() + timeout
        held_at: float | None = None
        self.held_s = 0.0
        while True:
            try:
                got = self._reader.read(None if held_at is not None else until)
            except (EOFError, OSError):
                raise ChildGone(self.exit_reason()) from None
            if got is None:
                raise ChildSilent(f"no answer from client process {self.pid} in {timeout:g} s")
            kind = got[0]
            if kind == "held":
                held_at = time.monotonic()
                self.holding.set()
            elif kind == "going":
                self.holding.clear()
                if held_at is not None:
                    waited = time.monotonic() - held_at
                    self.held_s += waited
                    until += waited
                held_at = None
            elif kind == "done":
                return got[1]
            elif kind == "error":
                raise ChildFailed(got[1])

    def cast(self, method: str, arg: Any) -> None:
        """`method(arg)` in the child with no answer of its own (what it does comes back as
        messages, ``receive``). ChildGone, or ChildSilent when the child reads nothing."""
        try:
            self._write(("cast", method, arg))
        except (BrokenPipeError, ValueError, OSError):
            raise ChildGone(self.exit_reason()) from None

    def receive(self, until: float | None) -> Any | None:
        """The child's next message; None when `until` came first. ChildGone when it died."""
        try:
            return self._reader.read(until)
        except (EOFError, OSError):
            raise ChildGone(self.exit_reason()) from None

    def hold(self, point: str) -> None:
        with contextlib.suppress(BrokenPipeError, ValueError, OSError, ChildSilent):
            self._write(("hold", point))

    def release(self) -> None:
        with contextlib.suppress(BrokenPipeError, ValueError, OSError, ChildSilent):
            self._write(("release",))

    def exit_reason(self) -> str:
        """How the child ended, once its pipe did (it is gone or going)."""
        try:
            code = self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            return f"client process {self.pid} closed its pipe"
        if code < 0:
            return f"client process {self.pid} killed by {signal.Signals(-code).name}"
        return f"client process {self.pid} exited with {code}"

    def close(self, grace: float = CLOSE_GRACE_S) -> None:
        """Asks the child to close its client and exit; killed past `grace` seconds (or at
        once, `grace` 0: a child whose state is unknown)."""
        if grace > 0 and self.alive():
            try:
                self._write(("close",), grace)
                until = time.monotonic() + grace
                while self._reader.read(until) not in (None, ("closed",)):
                    pass
            except (EOFError, OSError, ValueError, ChildSilent):
                pass
        self.kill()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10.0)
        for f in (self._in, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                if f is not None:
                    f.close()


class SlotProcess:
    """A worker slot's client process as the client faults see it (nemesis/targets.py
    ClientProcess): the slot's current child, whichever process of the slot runs now."""

    def __init__(self, slot: int, role: str, prefix: Callable[[], list[str]] = list) -> None:
        """`prefix`: what each of the slot's children is started behind (its network)."""
        self.slot = slot
        self.role = role
        self._prefix = prefix
        self._child: ChildProcess | None = None
        # The Jepsen process (or pipelined producer) the slot runs now, for the fault's record.
        self.process: int | None = None
        self._held: str | None = None
        self._lock = threading.Lock()

    def pid(self) -> int | None:
        child = self._child
        return child.pid if child is not None and child.alive() else None

    @property
    def held(self) -> str | None:
        return self._held

    def hold(self, point: str) -> None:
        if point not in HOLD_POINTS:
            raise ValueError(f"no hold point '{point}': {', '.join(HOLD_POINTS)}")
        with self._lock:
            self._held = point
            if self._child is not None:
                self._child.hold(point)

    def release(self) -> None:
        with self._lock:
            self._held = None
            if self._child is not None:
                self._child.release()

    def start(self, factory: str, config: dict[str, Any]) -> ChildProcess:
        """A new child for the slot's next process, held where the slot is held."""
        child = ChildProcess(factory, config, held=self._held, prefix=self._prefix())
        with self._lock:
            self._child = child
            self.process = config.get("process", config.get("producer"))
            # A hold or release between the child's start and now reaches it here.
            if self._held is not None:
                child.hold(self._held)
            else:
                child.release()
        return child

    def gone(self, child: ChildProcess) -> None:
        """`child` no longer serves the slot (closed or killed)."""
        with self._lock:
            if self._child is child:
                self._child = None

    def kill(self) -> None:
        with self._lock:
            child, self._child = self._child, None
        if child is not None:
            child.kill()


class SlotProcesses:
    """Every worker slot's client process of one run (the workload's ``hints``)."""

    def __init__(
        self,
        role_of: Callable[[int], str],
        prefix_of: Callable[[int], list[str]] = lambda slot: [],
    ) -> None:
        """`prefix_of`: what a slot's children are started behind (net_prefix)."""
        self._role_of = role_of
        self._prefix_of = prefix_of
        self._slots: dict[int, SlotProcess] = {}
        self._lock = threading.Lock()

    def slot(self, slot: int) -> SlotProcess:
        with self._lock:
            if slot not in self._slots:
                self._slots[slot] = SlotProcess(
                    slot, self._role_of(slot), lambda: self._prefix_of(slot)
                )
            return self._slots[slot]

    def by_slot(self) -> dict[int, SlotProcess]:
        with self._lock:
            return dict(self._slots)

    def close(self) -> None:
        """Kills every child left (its slot's thread closed it already, unless it hung)."""
        for sp in self.by_slot().values():
            sp.release()
            sp.kill()


# The child's side --------------------------------------------------------------------------------
class Gate:
    """Where the child's client waits while a point of it is held (``at``)."""

    def __init__(self, say: Callable[[Any], None]) -> None:
        self._say = say
        self._held: str | None = None
        self._cond = threading.Condition()

    def set(self, point: str | None) -> None:
        with self._cond:
            self._held = point
            self._cond.notify_all()

    def at(self, point: str) -> None:
        """Blocks while `point` is held, telling the parent when it starts and stops waiting."""
        with self._cond:
            if self._held != point:
                return
            self._say(("held", point))
            while self._held == point:
                self._cond.wait()
        self._say(("going", point))


def die_with_parent(parent: int) -> None:
    """SIGKILL when the parent dies (a stopped child too); gone already: exit now."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _load(factory: str) -> Callable[..., Any]:
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)


def serve(parent: int) -> None:
    """The child's life: build the client the first message names, answer its calls in order,
    apply holds and releases as they come; stdin's end or ``close`` ends it."""
    die_with_parent(parent)
    # The parent ends the child; a terminal's Ctrl-C is the parent's to handle.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Only frames go to the parent's pipe: anything else printing to stdout goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    lock = threading.Lock()

    def say(message: Any) -> None:
        with lock:
            write_frame(out, message)

    gate = Gate(say)
    calls: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        reader = FrameReader(inp.fileno())
        while True:
            try:
                got = reader.read(None)
            except (EOFError, OSError):
                os._exit(0)  # the parent is gone or done with this client
            if got[0] == "hold":
                gate.set(got[1])
            elif got[0] == "release":
                gate.set(None)
            else:
                calls.put(got)

    threading.Thread(target=read, name="requests", daemon=True).start()
    init = calls.get()
    gate.set(init[3])
    try:
        client = _load(init[1])(init[2], gate, say)
    except Exception as exc:
        say(("failed", f"the client process could not start: {type(exc).__name__}: {exc}"))
        return
    say(("ready", os.getpid()))
    # A client with work of its own between requests (a pipelined producer serving its
    # delivery reports) does it while no request waits.
    idle: Callable[[float], None] | None = getattr(client, "idle", None)
    while True:
        if idle is None:
            got = calls.get()
        else:
            try:
                got = calls.get_nowait()
            except queue.Empty:
                idle(IDLE_S)
                continue
        if got[0] == "close":
            with contextlib.suppress(Exception):
                client.close()
            say(("closed",))
            return
        kind, method, arg = got
        try:
            result = getattr(client, method)(arg)
        except Exception as exc:  # the client's bug: the parent records the op as unknown
            say(("error", f"{type(exc).__name__}: {exc}"))
            continue
        if kind == "call":
            say(("done", result))


if __name__ == "__main__":
    serve(int(sys.argv[1]))
    sys.stdout.flush()
    os._exit(0)
