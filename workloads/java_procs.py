"""One JVM per worker slot, for the runs whose client faults stop one client alone.

A run's Java clients are handles of one JVM (workloads/java_host.py), which a signal cannot
stop one at a time. When the plan's nemesis holds a client kind that needs it (nemesis/client.py
``needs_processes``), the generator says so (``client_procs.CLIENT_PROCS``) and each worker slot's
client runs in a JVM of its own, which the nemesis sees through the workload's hints
(nemesis/targets.py ``CLIENT_PROCS_HINT``: slot -> ``ClientProcess``). The shared JVM still
serves what is not one slot's: setup, recorded pipelined producers, the final reads.

A killed JVM ends the slot's op in flight as `info` (JavaGone), which retires its process; the
slot's next process gets a fresh JVM. Each JVM exits when its stdin closes, as the shared one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from workloads.client_procs import HOLD_POINTS
from workloads.java_host import JavaError, JavaGone, JavaHost

# One slot's client: a producer and a consumer, or a share consumer.
SLOT_HEAP = "-Xmx160m"


class JavaProcess:
    """One worker slot's JVM (nemesis/targets.py ``ClientProcess``): the same object for the
    slot's whole run, its JVM replaced after a kill."""

    def __init__(self, slot: int, role: str, start: Callable[[int], JavaHost]) -> None:
        """`start`: a fresh JVM for the slot it is given."""
        self.slot = slot
        self.role = role
        self._start = start
        self._host: JavaHost | None = None
        self._lock = threading.Lock()
        self._point: str | None = None
        self.closed = False
        # The Jepsen process the slot runs now (for the fault's record).
        self.process: int | None = None

    def host(self) -> JavaHost:
        """The slot's JVM; a fresh one when the last is gone (killed): its client is a new
        process, with nothing held."""
        with self._lock:
            if self.closed:
                raise JavaGone(f"slot {self.slot}'s Java client is closed")
            if self._host is None or not self._host.alive:
                if self._host is not None:
                    self._host.close()
                self._host = self._start(self.slot)
            return self._host

    def pid(self) -> int | None:
        h = self._host
        return h.pid if h is not None and h.alive else None

    def hold(self, point: str) -> None:
        if point not in HOLD_POINTS:
            raise ValueError(f"no hold point {point!r}: {', '.join(HOLD_POINTS)}")
        h = self._host
        if h is None or not h.alive:
            raise JavaGone(f"slot {self.slot} has no Java client to hold")
        self._point = point
        h.held = True
        try:
            h.call("hold", 0, point, timeout=10)
        except (JavaError, JavaGone):
            h.held = False
            raise

    def release(self) -> None:
        h = self._host
        if h is None:
            return
        try:
            if h.alive:
                h.call("release", 0, timeout=10)
        except (JavaError, JavaGone):
            pass  # a JVM that cannot answer holds nothing any more once it is gone
        finally:
            h.held = False
            self._point = None

    def close(self) -> None:
        with self._lock:
            self.closed = True
            h, self._host = self._host, None
        if h is not None:
            h.close()


class SlotJvms:
    """The JavaProcess of every worker slot, started on the slot's first client."""

    def __init__(
        self,
        slots: Iterable[int],
        role_of: Callable[[int], str],
        start: Callable[[int], JavaHost],
    ) -> None:
        """`slots`: the worker slots whose clients are one slot's (not a shared JVM's); `start`:
        a fresh JVM for a slot."""
        self.procs = {s: JavaProcess(s, role_of(s), start) for s in slots}

    def host(self, slot: int, process: int) -> JavaHost | None:
        """The slot's own JVM, for `process` (its client now); None for a slot that has none."""
        proc = self.procs.get(slot)
        if proc is None:
            return None
        proc.process = process
        return proc.host()

    def hint(self) -> dict[int, JavaProcess]:
        return dict(self.procs)

    def close(self) -> None:
        for p in self.procs.values():
            p.release()
            p.close()
