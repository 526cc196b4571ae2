"""The append-only JSONL writer the harness records a run with.

Every line is written whole and flushed before `append` returns, so a SIGKILL loses at most the
line being written (which readers then report as torn); a writer of thousands of lines a second
may flush by time instead (`flush_seconds`), losing at most that long's lines. fsync is separate
from flush: flushing survives the death of our process, only fsync survives the death of the
machine, and it costs a disk round trip, so it is batched.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from history import strict_json
from history.format import COMPLETIONS, FORMAT_VERSION, HEADER_KEY, INVOKE, REQUIRED_FIELDS

# One encoder for every line: json.dumps builds a new one per call when given separators.
_encode = strict_json.encoder(separators=(",", ":"))


class HistoryWriter:
    """Appends operations to a new `history.jsonl`, giving each its dense `index`.

    `fsync_every`: fsync after this many lines (0: never; 1: every line).
    `fsync_seconds`: also fsync when this long has passed since the last fsync.
    Safe to share between threads: lines never interleave and indices follow file order.
    """

    def __init__(
        self,
        path: str | Path,
        run: str,
        *,
        started_wall: float | None = None,
        fsync_every: int = 0,
        fsync_seconds: float | None = None,
        header: dict[str, Any] | None = None,
        flush_seconds: float | None = None,
    ) -> None:
        """`header`: further header fields, what the writer says of its clients (format.py).
        `flush_seconds`: None, every line is flushed before `append` returns; else lines are
        flushed once this long has passed since the last flush (and by `flush`), which a
        writer of thousands of lines a second asks for: a SIGKILL then loses at most that
        long's lines, and at most the last line on disk is torn."""
        self.path = Path(path)
        # "x": a history is never appended to by a second run or overwritten.
        self._file = open(self.path, "x", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._next_index = 0
        self._fsync_every = fsync_every
        self._fsync_seconds = fsync_seconds
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self._flush_seconds = flush_seconds
        self._last_flush = self._last_sync
        header = {
            HEADER_KEY: FORMAT_VERSION,
            "started_wall": time.time() if started_wall is None else started_wall,
            "run": run,
            **(header or {}),
        }
        self._write_line(header)

    def append(self, op: dict[str, Any]) -> dict[str, Any]:
        """Write one operation; returns it with its `index` filled in."""
        missing = [k for k in REQUIRED_FIELDS if k != "index" and k not in op]
        if missing:
            raise ValueError(f"operation lacks {', '.join(missing)}: {op!r}")
        if op["type"] != INVOKE and op["type"] not in COMPLETIONS:
            raise ValueError(f"operation type {op['type']!r} is not invoke/ok/fail/info")
        with self._lock:
            record = {"index": self._next_index, **{k: v for k, v in op.items() if k != "index"}}
            self._write_line(record)
            self._next_index += 1
        return record

    def append_encoded(self, rest: str) -> int:
        """Writes one operation already encoded but for its index: `rest` is the line after
        `{"index":N,` (every other field, as `append` would encode them, and the closing
        brace), which the caller vouches for (the recorder's pipelined sends, encoded without
        json: docs/clients.md "Pipelined sends"). Returns the op's index."""
        with self._lock:
            index = self._next_index
            self._write_text(f'{{"index":{index},{rest}\n')
            self._next_index = index + 1
        return index

    def _write_line(self, record: dict[str, Any]) -> None:
        self._write_text(_encode(record) + "\n")

    def _write_text(self, line: str) -> None:
        # One write call per line: a torn line can only be the last one.
        self._file.write(line)
        if self._flush_seconds is None:
            self._file.flush()
        elif time.monotonic() - self._last_flush >= self._flush_seconds:
            self._file.flush()
            self._last_flush = time.monotonic()
        self._unsynced += 1
        if self._should_sync():
            self.sync()

    def _should_sync(self) -> bool:
        if self._fsync_every and self._unsynced >= self._fsync_every:
            return True
        return (
            self._fsync_seconds is not None
            and time.monotonic() - self._last_sync >= self._fsync_seconds
        )

    def flush(self) -> None:
        """Everything appended so far into the file (with `flush_seconds`, called by a timer)."""
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                self._last_flush = time.monotonic()

    def sync(self) -> None:
        """Make everything written so far durable."""
        os.fsync(self._file.fileno())
        self._unsynced = 0
        self._last_sync = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._file.closed:
                return
            self._file.flush()
            if self._unsynced and (self._fsync_every or self._fsync_seconds is not None):
                self.sync()
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
