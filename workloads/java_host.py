"""A JVM running Kafka's own Java client beside the harness (workloads/java/KchaosClient.java).

One JVM per client host serves every producer and consumer of the run over a line protocol:
requests are tab-separated lines on its stdin, replies and rebalance events JSON lines on its
stdout. The JVM runs each handle's requests in order on a thread of its own, so a handle behaves
as the single-threaded client the Python side drives; many handles run at once.

The class is compiled once per Kafka release (and source) against that release's jars, which
kchaos assembles from Maven Central for its nodes, into the cache beside them. The JVM exits when
its stdin closes, so a crashed client host leaves no JVM behind (a stopped one too, once it is
continued: nemesis/client.py's heal).

A run whose client faults stop one client alone (nemesis/client.py) gives each worker slot a
JVM of its own (workloads/java_procs.py); the protocol is the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusters.errors import ClusterError
from clusters.java_tool import javac_into
from clusters.kafka_dist import KafkaDist, ensure_dist, quiet_logging

SOURCES = Path(__file__).with_name("java")
MAIN_CLASS = "KchaosClient"
# Enough for a run's few dozen producers and consumers; small, as every JVM on a 2-core box.
HEAP = "-Xmx384m"
START_TIMEOUT_S = 60.0
# How often a call's wait looks whether the JVM is stopped or held.
STALL_CHECK_S = 0.5


class JavaClientError(ClusterError):
    """The Java client cannot be built or started; the message says why."""


class JavaGone(Exception):
    """The JVM exited or stopped answering: what was in flight has an unknown outcome."""


class JavaError(Exception):
    """An exception the Java client threw, with Kafka's category of it (KIP-1050)."""

    def __init__(self, message: str, category: str, pre: bool, held_ms: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.category = category
        # Reported by send() before the record was queued: it never reached a broker.
        self.pre = pre
        # How long the call waited at a hold (nemesis/client.py) before it was made.
        self.held_ms = held_ms

    def __str__(self) -> str:
        return f"{self.category}: {self.message}"


def compiled(dist: KafkaDist, extra: Path | None = None) -> Path:
    """The directory holding KchaosClient's classes for `dist`, compiled on first use (every
    source in workloads/java/, one digest over all of them). `extra`: a folder of further
    sources compiled with them (the share workload's, workloads/java/share/, which need a
    release with share groups), into a directory of their own digest."""
    sources = sorted(SOURCES.glob("*.java"))
    if extra is not None:
        sources += sorted(extra.glob("*.java"))
    h = hashlib.sha256()
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    digest = h.hexdigest()[:12]
    out = dist.home / "kchaos-java-client" / digest
    if (out / f"{MAIN_CLASS}.class").exists():
        return out
    tmp = out.with_name(f"{digest}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    why = javac_into(dist, sources, tmp)
    if why is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise JavaClientError(f"the Java client {why}")
    with contextlib.suppress(OSError):
        tmp.rename(out)  # another run may have won the race; its classes are the same
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def client_dist(version: str) -> KafkaDist:
    try:
        return ensure_dist(version)
    except ClusterError as exc:
        raise JavaClientError(f"the Java client's Kafka {version}: {exc}") from None


class _Call:
    __slots__ = ("callback", "done", "reply")

    def __init__(self, callback: Callable[[dict[str, Any]], None] | None) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None
        self.callback = callback


class JavaHost:
    """The JVM and its protocol: blocking calls, calls answered by callback, and events."""

    def __init__(
        self,
        dist: KafkaDist,
        log: Path | None = None,
        extra_sources: Path | None = None,
        heap: str = HEAP,
        prefix: list[str] | None = None,
    ) -> None:
        """`extra_sources`: further sources the JVM runs (``compiled``'s `extra`); `heap`: its
        -Xmx (one slot's client needs less than a whole run's); `prefix`: what the JVM is
        started behind (one slot's network, workloads/client_procs.py net_prefix)."""
        self.version = dist.version
        classes = compiled(dist, extra_sources)
        cmd = [
            *(prefix or ()),
            "java",
            heap,
            "-XX:+UseSerialGC",
            "-Xss512k",
            # A JVM crash's report goes beside other temporary files, not into the working
            # directory (a checkout, when the run was started from one).
            f"-XX:ErrorFile={tempfile.gettempdir()}/kchaos-java-client-hs_err_%p.log",
            *quiet_logging(),
            "-cp",
            f"{classes}{os.pathsep}{dist.host_classpath()}",
            MAIN_CLASS,
        ]
        self._log = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,  # Ctrl-C goes to the harness, which closes the JVM itself
        )
        self._ids = itertools.count(1)
        self._handles = itertools.count(1)
        self._pending: dict[int, _Call] = {}
        self._listeners: dict[int, Callable[[dict[str, Any]], None]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._gone: str | None = None
        self._ready = threading.Event()
        # A hold (nemesis/client.py pause-send/-commit/-abort) is on: a call's wait is not
        # counted while it lasts, nor while the JVM is stopped (SIGSTOP), so that a client the
        # nemesis pauses waits as long as its pause, as a paused application would.
        self.held = False
        self._reader = threading.Thread(target=self._read, name="java-client", daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT_S):
            self.close()
            raise JavaClientError(
                f"the Java client (Kafka {dist.version}) did not start within "
                f"{START_TIMEOUT_S:g} s: {self._gone or 'no answer'}"
            )

    # Protocol -------------------------------------------------------------------------------
    def handle(self, listener: Callable[[dict[str, Any]], None] | None = None) -> int:
        h = next(self._handles)
        if listener is not None:
            self._listeners[h] = listener
        return h

    def forget(self, h: int) -> None:
        self._listeners.pop(h, None)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def stalled(self) -> bool:
        """Is the JVM held at a point or stopped by a signal (its /proc state T)?"""
        return self.held or proc_state(self._proc.pid) in ("T", "t")

    def _wait(self, call: _Call, timeout: float) -> bool:
        """Waits for `call`'s answer for `timeout` seconds not counting time the JVM stalled."""
        left = timeout
        while left > 0:
            step = min(left, STALL_CHECK_S)
            if call.done.wait(step):
                return True
            if not self.stalled():
                left -= step
        return call.done.is_set()

    def call(self, cmd: str, h: int, *args: Any, timeout: float) -> Any:
        """The result of one request; raises JavaError for what the client threw, JavaGone
        when the JVM exited or `timeout` passed without an answer (time it stalled, held or
        stopped, not counted)."""
        call = _Call(None)
        i = self._send(call, cmd, h, args)
        if not self._wait(call, timeout):
            with self._lock:
                self._pending.pop(i, None)
            raise JavaGone(f"no answer to {cmd} within {timeout:g} s")
        assert call.reply is not None
        err = error_of(call.reply)
        if err is not None:
            raise err
        return call.reply.get("r")

    def call_async(
        self, cmd: str, h: int, *args: Any, callback: Callable[[dict[str, Any]], None]
    ) -> None:
        """Sends a request whose reply `callback` gets, on the reader thread."""
        self._send(_Call(callback), cmd, h, args)

    def _send(self, call: _Call, cmd: str, h: int, args: tuple[Any, ...]) -> int:
        """Writes the request; its id, under which its reply is awaited."""
        i = next(self._ids)
        line = "\t".join((str(i), cmd, str(h), *map(str, args))) + "\n"
        with self._lock:
            if self._gone is not None:
                raise JavaGone(self._gone)
            self._pending[i] = call
        try:
            with self._write_lock:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
        except (OSError, ValueError) as exc:
            # A JVM whose stdin broke is gone now, before its reader thread sees the EOF: the
            # slot's client must not be reported alive in between (java_procs.JavaProcess.pid).
            with self._lock:
                self._pending.pop(i, None)
                self._gone = self._gone or f"the Java client is gone: {exc}"
            raise JavaGone(f"the Java client is gone: {exc}") from None
        return i

    def _read(self) -> None:
        assert self._proc.stdout is not None
        try:
            for raw in self._proc.stdout:
                msg = json.loads(raw)
                i = msg.get("id")
                if i is None:
                    if "ev" in msg:
                        listener = self._listeners.get(msg["h"])
                        if listener is not None:
                            listener(msg)
                    elif msg.get("ready"):
                        self._ready.set()
                    continue
                with self._lock:
                    call = self._pending.pop(i, None)
                if call is None:
                    continue  # its caller gave up waiting
                if call.callback is not None:
                    call.callback(msg)
                else:
                    call.reply = msg
                    call.done.set()
        except (OSError, ValueError) as exc:
            self._gone = f"the Java client's output broke: {exc}"
        finally:
            code = self._proc.poll()
            with self._lock:
                self._gone = self._gone or f"the Java client exited (code {code})"
                pending, self._pending = self._pending, {}
            gone = {"e": self._gone, "c": "gone", "pre": False}
            for call in pending.values():
                if call.callback is not None:
                    with contextlib.suppress(Exception):
                        call.callback(gone)
                else:
                    call.reply = gone
                    call.done.set()

    @property
    def alive(self) -> bool:
        return self._gone is None

    def close(self) -> None:
        """Ends the JVM: stdin closed (it exits), then SIGKILL if it lingers."""
        with contextlib.suppress(OSError, ValueError):
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        if self._log is not subprocess.DEVNULL:
            with contextlib.suppress(OSError):
                self._log.close()  # type: ignore[union-attr]


def proc_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat (R, S, T, Z, ...); None when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: the state follows the last ')'.
    rest = stat.rsplit(")", 1)[-1].split()
    return rest[0] if rest else None


def error_of(reply: dict[str, Any]) -> JavaError | JavaGone | None:
    """What a reply says went wrong; None: it succeeded."""
    if "e" not in reply:
        return None
    if reply.get("c") == "gone":
        return JavaGone(reply["e"])
    held = reply.get("held")
    return JavaError(
        reply["e"],
        reply.get("c", "other"),
        bool(reply.get("pre")),
        held if isinstance(held, int) and not isinstance(held, bool) else 0,
    )


def conf_args(conf: dict[str, Any]) -> list[str]:
    """A client configuration as the protocol's key=value arguments."""
    out = []
    for k, v in conf.items():
        text = str(v).lower() if isinstance(v, bool) else str(v)
        if "\t" in text or "\n" in text:
            raise ValueError(f"configuration {k} holds a tab or newline")
        out.append(f"{k}={text}")
    return out
