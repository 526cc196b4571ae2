"""The final reads' bookkeeping, in bounded memory whichever client reads: the sends acknowledged
during the run, which of them the reads found, and how long the reads may go on.

A pipelined run acknowledges millions of sends. As Python tuples in sets they took gigabytes;
here they are int64 values per key (`AckedSends`: growing array('q') buffers while the run
appends; `FinalTally`: sorted unique values and one bool per value once the reads begin), about
9 bytes per acknowledged send. `FinalTally` answers what a set difference answered before
(`missing`), and tests/unit/workloads/test_readback.py holds the two equal on generated input.
The Java client keeps the same tally in its JVM (workloads/java/KchaosFinal.java), from the
file `write_wanted` makes.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# The final reads' deadline extends while they make progress (`ReadDeadline`): past the budget,
# reading goes on as long as some record was read in the last PROGRESS_WINDOW_S, up to
# MAX_EXTENSION_S beyond the budget (inside the phase's hang budget's 600 s of slack,
# harness/run/interpreter.py FINAL_BUDGET_S).
PROGRESS_WINDOW_S = 10.0
MAX_EXTENSION_S = 300.0
# Missing sends named in the outcome (run.json's `final_reads.missing`).
MISSING_NAMED = 50


class AckedSends:
    """The (key, value) of every send acknowledged ok, appended by many threads."""

    def __init__(self) -> None:
        self._by_key: dict[int, array] = {}
        self._n = 0
        self._lock = threading.Lock()

    def add(self, key: int, value: int) -> None:
        with self._lock:
            buf = self._by_key.get(key)
            if buf is None:
                buf = self._by_key[key] = array("q")
            buf.append(value)
            self._n += 1

    def add_many(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Sends acknowledged where the harness did not see them (recorded in a JVM)."""
        keys = np.asarray(keys, dtype=np.int64)
        values = np.asarray(values, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        cuts = np.flatnonzero(np.diff(keys)) + 1
        with self._lock:
            for ks, vs in zip(np.split(keys, cuts), np.split(values, cuts), strict=True):
                if len(ks):
                    buf = self._by_key.setdefault(int(ks[0]), array("q"))
                    buf.frombytes(vs.astype(np.int64, copy=False).tobytes())
            self._n += len(keys)

    def __len__(self) -> int:
        with self._lock:
            return self._n

    def wanted(self) -> dict[int, np.ndarray]:
        """Per key, the acknowledged values sorted and unique: what the final reads must find."""
        with self._lock:
            return {
                k: sorted_unique(np.frombuffer(buf, dtype=np.int64))
                for k, buf in sorted(self._by_key.items())
                if len(buf)
            }


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique's answer by a sort and a neighbour comparison: numpy 2.4's np.unique took 20x
    a sort's time on a million int64 here."""
    out = np.sort(values)
    if len(out) < 2:
        return out
    keep = np.empty(len(out), dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


@dataclass
class FinalTally:
    """Which of the wanted values (per key, sorted unique) the final reads saw so far."""

    wanted: dict[int, np.ndarray]
    _hit: dict[int, np.ndarray] = field(init=False)
    remaining: int = field(init=False)

    def __post_init__(self) -> None:
        self._hit = {k: np.zeros(len(w), dtype=bool) for k, w in self.wanted.items()}
        self.remaining = self.acknowledged

    @property
    def acknowledged(self) -> int:
        return sum(len(w) for w in self.wanted.values())

    def saw(self, key: int, values: np.ndarray | Iterable[int]) -> None:
        """Values read from `key`'s partition (any order, repeats and strangers welcome)."""
        w = self.wanted.get(key)
        if w is None or not len(w):
            return
        vals = np.asarray(values if isinstance(values, np.ndarray) else list(values), np.int64)
        if not len(vals):
            return
        idx = np.searchsorted(w, vals)
        inside = idx < len(w)
        idx, vals = idx[inside], vals[inside]
        pos = idx[w[idx] == vals]
        hit = self._hit[key]
        fresh = sorted_unique(pos[~hit[pos]])  # a value read twice in one poll counts once
        self.remaining -= len(fresh)
        hit[fresh] = True

    def missing(self, most: int = MISSING_NAMED) -> list[list[int]]:
        """The first `most` wanted (key, value) not seen, in (key, value) order."""
        out: list[list[int]] = []
        for k in sorted(self.wanted):
            if len(out) >= most:
                break
            unseen = self.wanted[k][~self._hit[k]][: most - len(out)]
            out.extend([k, int(v)] for v in unseen)
        return out


def write_wanted(path: Path, wanted: dict[int, np.ndarray], keys: int) -> list[int]:
    """The wanted values of keys 0..keys-1 in one file, key after key, each key's sorted, as
    little-endian int64 (the JVM's final reads read it); returns each key's count."""
    counts = []
    with path.open("wb") as f:
        for k in range(keys):
            w = wanted.get(k, np.zeros(0, dtype=np.int64))
            f.write(w.astype("<i8", copy=False).tobytes())
            counts.append(len(w))
    return counts


@dataclass
class ReadDeadline:
    """When the final reads stop for want of time: the budget (`timeout` from `started`) is
    past and no record was read in the last `window` seconds, or `most` seconds beyond the
    budget have passed too. Times are time.monotonic() seconds, given by the caller."""

    started: float
    timeout: float
    window: float = PROGRESS_WINDOW_S
    most: float = MAX_EXTENSION_S
    last_progress: float = field(init=False)

    def __post_init__(self) -> None:
        # Reads that never read anything stop at the budget.
        self.last_progress = self.started - self.window

    def progressed(self, now: float) -> None:
        self.last_progress = now

    def over(self, now: float) -> bool:
        end = self.started + self.timeout
        if now < end:
            return False
        return now - self.last_progress >= self.window or now >= end + self.most
