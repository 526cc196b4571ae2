"""Pipelined sends recorded in the Java client's JVM (`--client java --send-mode async`, the
Java client's default; `--send-recorder harness` keeps the harness's recording).

The harness-recorded path sends every send over the JVM's line protocol and writes its two
history lines in Python, which bounds a run at a few thousand sends a second (docs/clients.md,
"Throughput against Kafka's own perf producer"). Here each worker slot's producer loop runs
whole in the JVM (workloads/java/KchaosRecorded.java): it invokes, sends and completes with the
harness path's semantics (lanes, producer ids, values, fail/info by KIP-1050 category, the
drain at the end) and writes the ops as binary records into a side file per slot, from which
the harness builds history.parquet at the end of the run (history/build.py). Python drives what
it drove before (the time limit, the rate, faults, the observer, final reads) and learns the
slot's counts, its sends in flight per partition and its highest process id from `rstats` when
the harness asks (`stats`), for the progress display, the busiest-leader target and the final
reads' process ids.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from history.sidefiles import highest_process
from workloads.java_client import DEFINITE_SEND, producer_conf
from workloads.java_host import JavaClientError, JavaError, JavaGone, JavaHost, conf_args
from workloads.pipelined import InFlight, QueueState, SlotSetup

# Beyond the drain itself: closing the producer and the side files.
STOP_GRACE_S = 30.0


class ClockMismatch(JavaClientError):
    """The JVM's System.nanoTime() is not the clock the harness's recorder reads."""


def check_clock(host: JavaHost, tries: int = 3) -> int:
    """The JVM's System.nanoTime() read between two time.monotonic_ns() of ours; raises
    ClockMismatch when it falls outside them every time. On Linux both read CLOCK_MONOTONIC
    (HotSpot's os::javaTimeNanos, CPython's time.monotonic_ns), so a JVM's times minus the
    recorder's start are on the history's clock; this holds it true where the run happens,
    before any time is written with it."""
    seen = []
    for _ in range(tries):
        before = time.monotonic_ns()
        jvm = int(host.call("clock", 0, timeout=15))
        after = time.monotonic_ns()
        if before <= jvm <= after:
            return jvm
        seen.append((before, jvm, after))
    raise ClockMismatch(
        "the Java client's System.nanoTime() is not this process's monotonic clock "
        f"(before, JVM, after in ns: {seen[-1]}): its sends cannot be recorded on the "
        "history's clock; use --send-recorder harness"
    )


def record_args(wl: QueueState, slot: int, setup: SlotSetup) -> list[str]:
    """The `record` request's arguments: the slot's own settings (kchaos.*) and the producer's
    configuration, the harness path's pipelined one (workloads/java_client.py producer_conf)."""
    own = {
        "dir": str(setup.side_dir),
        "slot": slot,
        "concurrency": setup.concurrency,
        "lanes": setup.lanes,
        "keys": wl.keys,
        "topic": wl.topic,
        "value_stride": int(wl.gen["value_stride"]),
        "t0_ns": setup.t0_ns,
        "interval_ns": int(setup.interval_s * 1e9),
        "start_delay_ns": int(setup.start_delay_s * 1e9),
        "drain_ms": int(setup.drain_s * 1000),
        "seed_prefix": setup.seed_prefix,
        # One list of a broker's definite refusals for both recording paths.
        "definite": ",".join(sorted(DEFINITE_SEND)),
    }
    conf = {**{f"kchaos.{k}": v for k, v in own.items()}, **producer_conf(wl, None, True)}
    return conf_args(conf)


class JvmRecordedProducer:
    """One worker slot's producer loop in the JVM (workloads/pipelined.py RecordedProducer)."""

    def __init__(self, wl: Any, host: JavaHost, slot: int, setup: SlotSetup) -> None:
        self.wl = wl
        self.host = host
        self.slot = slot
        self.setup = setup
        self._h = host.handle()
        self._leaders: dict[int, str] | None = None
        self._last: dict[str, Any] = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}
        self._counts: InFlight = getattr(wl, "sends_in_flight", None) or InFlight(wl.keys)
        # Keyed by the slot: its producers come and go inside the JVM.
        self._row = self._counts.register(-1 - slot)
        self._push_leaders()
        check_clock(host)
        host.call("record", self._h, *record_args(wl, slot, setup), timeout=60)

    @property
    def side_file(self) -> Path:
        return self.setup.side_dir / f"slot{self.slot}.ops"

    @property
    def acked_file(self) -> Path:
        return self.setup.side_dir / f"slot{self.slot}.acked"

    def _push_leaders(self) -> None:
        """The partition leaders the slot's lines name, when the workload's map changed."""
        leaders = self.wl.leaders.leaders
        if leaders is self._leaders:
            return
        names = ",".join(leaders.get(k) or "" for k in range(self.wl.keys))
        with contextlib.suppress(JavaError, JavaGone):
            self.host.call("leaders", 0, names, timeout=15)
            self._leaders = leaders

    def _took(self, stats: dict[str, Any]) -> dict[str, Any]:
        self._last = stats
        flight = stats.get("in_flight") or []
        for k in range(min(len(flight), len(self._row))):
            self._row[k] = int(flight[k])
        return stats

    def stats(self) -> dict[str, Any]:
        """The JVM's counts so far; with `gone` (why) and the last counts when the JVM or the
        slot's loop is gone."""
        self._push_leaders()
        try:
            stats = self._took(self.host.call("rstats", self._h, timeout=15))
        except (JavaError, JavaGone) as exc:
            return {**self._last, "gone": str(exc)}
        if not stats.get("running", True):
            return {**stats, "gone": stats.get("error") or "the slot's loop ended"}
        return stats

    def finish(self) -> dict[str, Any]:
        """Stops the loop (it drains, then closes its producer and files); the final stats.
        The slot's acknowledged sends then join the workload's, for the final reads. A JVM
        that is gone leaves the counts it last gave and the highest process its file names."""
        try:
            stats = self._took(
                self.host.call("rstop", self._h, timeout=self.setup.drain_s + STOP_GRACE_S)
            )
        except (JavaError, JavaGone) as exc:
            stats = dict(self._last)
            stats["error"] = f"the slot's JVM did not stop cleanly: {exc}"
            if self.side_file.exists():
                stats["highest"] = max(
                    int(stats.get("highest") or 0), highest_process(self.side_file) or 0
                )
        finally:
            self._counts.unregister(-1 - self.slot)
            self.host.forget(self._h)
        self.wl.acked_bulk(*read_acked_arrays(self.acked_file))
        return stats


def _acked_rows(path: Path) -> np.ndarray:
    """The slot's binary file of little-endian int64 (key, offset or -1, value) triples, one row
    each (a torn last triple, from a JVM killed mid-write, left out)."""
    if not path.exists():
        return np.zeros((0, 3), dtype="<i8")
    raw = np.fromfile(path, dtype="<i8")
    return raw[: len(raw) - len(raw) % 3].reshape(-1, 3)


def read_acked_arrays(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The slot's acknowledged sends' keys and values, as arrays: what the final reads look
    for (workloads/readback.py AckedSends), 16 bytes a send."""
    raw = _acked_rows(path)
    return raw[:, 0].astype(np.int64), raw[:, 2].astype(np.int64)


def read_acked(path: Path) -> list[tuple[int, int | None, int]]:
    """The slot's acknowledged sends, (key, offset or None, value), for a reader who wants
    them one by one (tests); the final reads take `read_acked_arrays`."""
    raw = _acked_rows(path)
    offsets: list[int | None] = raw[:, 1].tolist()
    offsets = [o if o is not None and o >= 0 else None for o in offsets]
    return list(zip(raw[:, 0].tolist(), offsets, raw[:, 2].tolist(), strict=True))
