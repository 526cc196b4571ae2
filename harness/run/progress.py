"""The live display of a run: time left, operation outcomes so far, and the faults now on."""

from __future__ import annotations

import time
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from harness.console import console


class RunProgress:
    def __init__(self, total_s: float, recorder: Any, driver: Any, enabled: bool = True) -> None:
        self.total_s = total_s
        self.recorder = recorder
        self.driver = driver
        self.enabled = enabled and console.is_terminal
        self._progress = Progress(
            TextColumn("[bold]run[/bold]"),
            BarColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=False,
        )
        self._task = None

    def __enter__(self) -> RunProgress:
        if self.enabled:
            self._progress.start()
            self._task = self._progress.add_task(self._describe(), total=self.total_s)
        return self

    def _describe(self) -> str:
        c = self.recorder.counts
        faults = ", ".join(self.driver.describe_active()) or "none"
        return (
            f"[green]ok {c['ok']}[/green] [red]fail {c['fail']}[/red] "
            f"[yellow]info {c['info']}[/yellow]  faults: {faults}"
        )

    def update(self, elapsed_s: float) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=elapsed_s, description=self._describe())

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._progress.stop()


def wait_out(total_s: float, recorder: Any, driver: Any, enabled: bool = True) -> None:
    """Returns ``total_s`` seconds from now, showing the run's progress meanwhile."""
    t0 = time.monotonic()
    with RunProgress(total_s, recorder, driver, enabled=enabled) as progress:
        while (elapsed := time.monotonic() - t0) < total_s:
            progress.update(elapsed)
            time.sleep(0.25)
        progress.update(total_s)
