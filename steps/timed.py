"""A thread that carries out planned steps at their times into the run and can be stopped."""

from __future__ import annotations

import threading
import time


class TimedSteps:
    """Subclasses implement ``_loop`` and wait for a step with ``_until_due``."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = 0.0

    def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """No step begins after this; the one under way ends first (each is bounded)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _until_due(self, at_s: float) -> bool:
        """Waits until ``at_s`` seconds into the run; True if stopped first."""
        return self._stop.wait(max(0.0, self._started + at_s - time.monotonic()))
