"""The one error a history reader raises: a sentence naming the file and line, never a traceback."""

from __future__ import annotations

from pathlib import Path


class HistoryError(Exception):
    """A history that cannot be read, with the place that shows why."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")
