"""Where a run's time went: each phase's start and length, kept in run.json's ``phases``.

A user whose run took ten minutes asks which part did (bench/bench_verdict.py reads the same
record, matching its samples of the processes' memory to phases by the wall-clock starts).
"""

from __future__ import annotations

import time
from typing import Any


class Phases:
    """Phases one after another: each lasts from its mark to the next one's (or to ``close``)."""

    def __init__(self) -> None:
        self._marks: list[tuple[str, float, float]] = []
        self._closed: float | None = None

    def mark(self, name: str) -> None:
        """``name`` begins now; the phase before it, if any, ends now. Marking the phase that
        is already running changes nothing (the supervisor's notes repeat some)."""
        if self._marks and self._marks[-1][0] == name:
            return
        self._marks.append((name, time.time(), time.monotonic()))

    def close(self) -> None:
        self._closed = time.monotonic()

    def record(self) -> list[dict[str, Any]]:
        """run.json's ``phases``: name, wall-clock start (Unix seconds) and seconds, in order."""
        end = self._closed if self._closed is not None else time.monotonic()
        out = []
        for i, (name, wall, mono) in enumerate(self._marks):
            until = self._marks[i + 1][2] if i + 1 < len(self._marks) else end
            out.append(
                {"phase": name, "started_wall": round(wall, 3), "seconds": round(until - mono, 3)}
            )
        return out
