"""The run's one clock and one history: every component records operations through a Recorder.

Times are monotonic nanoseconds since the run started, taken under the writer's ordering so that
file order and time order agree. Counts feed the progress display.

A pipelined run's sends (thousands a second, most of a thick history) are written beside
history.jsonl as binary records (`jvm-sends/harness.ops`, history/sidefiles.py's format, the
JVM's own), from which history.parquet is built at the end as from a JVM's side files
(history/build.py; docs/history.md, "Pipelined sends"): every op of a process whose send
invocation went there goes there too, so each process's ops are in one file.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from history import strict_json
from history.format import (
    FAIL,
    INFO,
    INVOKE,
    JVM_SENDS_DIR,
    OK,
    RECORDER_FIELDS,
    is_client,
)
from history.sidefiles import SEND_RECORD, SENDS_TAG, TYPE_CODES, SideWriter
from history.writer import HistoryWriter

# The recorder's own side file of pipelined sends (docs/history.md, "Pipelined sends").
SENDS_SIDE_FILE = "harness.ops"

_NODES: dict[str | None, str] = {}


def _node_text(node: str | None) -> str:
    """A node name as JSON (a handful of names per run: encoded once each)."""
    text = _NODES.get(node)
    if text is None:
        text = _NODES[node] = strict_json.dumps(node)
    return text


class Recorder:
    def __init__(
        self,
        path: Path,
        run: str,
        header: dict[str, Any] | None = None,
        flush_seconds: float | None = None,
        sends_beside: bool = False,
    ) -> None:
        """`flush_seconds`: flush the history by time rather than every line (pipelined
        sends, thousands of lines a second); a timer flushes what an idle moment leaves.
        `sends_beside`: pipelined sends (a producer's, single-send ops) are written as binary
        records into the side file SENDS_SIDE_FILE rather than as lines."""
        self._t0 = time.monotonic_ns()
        self._writer = HistoryWriter(
            path, run, fsync_seconds=1.0, header=header, flush_seconds=flush_seconds
        )
        # Taking the time and writing under one lock keeps `time` non-decreasing in file order.
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self._closed = False
        self._sends_beside = sends_beside
        self._beside: SideWriter | None = None
        # Process -> (key, value) of its send in flight, whose invocation went beside.
        self._beside_open: dict[int, tuple[int, int]] = {}
        self._flusher: threading.Thread | None = None
        if flush_seconds is not None:
            self._flush_every = flush_seconds
            self._flusher = threading.Thread(target=self._flush_loop, name="history-flush")
            self._flusher.daemon = True
            self._flusher.start()

    def _flush_loop(self) -> None:
        while not self._closed:
            time.sleep(self._flush_every)
            self._writer.flush()
            with self._lock:
                if self._beside is not None and not self._closed:
                    self._beside.flush()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._t0

    @property
    def t0_ns(self) -> int:
        """The history's zero in time.monotonic_ns() (CLOCK_MONOTONIC): a writer in another
        process (a JVM recording sends) subtracts it from the same clock."""
        return self._t0

    @property
    def side_dir(self) -> Path:
        """Where writers beside this one put their side files (history/merge.py)."""
        return self._writer.path.parent / JVM_SENDS_DIR

    def add_counts(self, counts: dict[str, int]) -> None:
        """Client completions recorded elsewhere (side files), for the display and run.json."""
        with self._lock:
            for type_, n in counts.items():
                if n:
                    self.counts[type_] += n

    def record(
        self,
        type_: str,
        f: str,
        value: Any,
        process: int | str,
        node: str | None = None,
        error: str | None = None,
        producer: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`producer`: the producer instance of a pipelined send (docs/history.md); absent
        from the line when None, so histories without pipelining are as they were. `extra`:
        the op's further fields (a completion's `Completion.extra`), written last in their
        order; None or empty: none. A name the recorder writes itself is refused (ValueError):
        a client's field must never hide the op's own time or node."""
        if extra:
            clash = sorted(RECORDER_FIELDS & extra.keys())
            if clash:
                raise ValueError(f"op fields {clash} are the history's own, not a client's")
        op: dict[str, Any] = {"type": type_, "f": f, "value": value, "process": process}
        if error is not None:
            op["error"] = error
        if self._sends_beside and f == "send" and producer is not None:
            sent = self._beside_send(type_, value, process)
            if sent is not None:
                key, offset, v = sent
                self._beside_record(type_, key, offset, v, process, node, producer, error)  # type: ignore[arg-type]
                return op
        with self._lock:
            if self._closed:
                # The history is final: an operation ending now stays an open invocation,
                # which is what it is to a reader (it may or may not have happened).
                return op
            op["time"] = self.now_ns()
            op["wall"] = time.time()
            op["node"] = node
            if producer is not None:
                op["producer"] = producer
            if extra:
                op.update(extra)
            written = self._writer.append(op)
        if type_ != INVOKE and is_client(process):
            self.counts[type_] += 1
        return written

    # A pipelined send's invocation and its ok, the lines of most of a thick history: encoded
    # here from their few numbers (f-strings around constant parts) rather than built as a
    # dict and given to json, which cost most of the recorder's time per send (docs/clients.md
    # "Pipelined sends"). The bytes are the ones `record` writes for the same op (the unit
    # test test_recorder_fast_lines compares them).
    def send_invoke(
        self, key: int, value: int, process: int, node: str | None, producer: int
    ) -> None:
        """`invoke(..., producer=producer)` of the send [["send", key, value]]."""
        if self._sends_beside:
            self._beside_record(INVOKE, key, None, value, process, node, producer, None)
            return
        head = f'"type":"invoke","f":"send","value":[["send",{key},{value}]]'
        self._send_line(head, process, node, producer, completed=False)

    def send_ok(
        self,
        key: int,
        offset: int | None,
        value: int,
        process: int,
        node: str | None,
        producer: int,
    ) -> None:
        """`record("ok", "send", [["send", key, [offset, value]]], ...)` of a pipelined send."""
        if self._sends_beside and process in self._beside_open:
            self._beside_record(OK, key, offset, value, process, node, producer, None)
            return
        at = "null" if offset is None else offset
        head = f'"type":"ok","f":"send","value":[["send",{key},[{at},{value}]]]'
        self._send_line(head, process, node, producer, completed=True)

    def _send_line(
        self, head: str, process: int, node: str | None, producer: int, completed: bool
    ) -> None:
        """One send line: `head` (type, f and value), then the fields every send line has, its
        time taken under the lock so that times follow file order."""
        node_text = _node_text(node)
        with self._lock:
            if self._closed:
                return
            now = time.monotonic_ns() - self._t0
            self._writer.append_encoded(
                f'{head},"process":{process},"time":{now},"wall":{time.time()!r},'
                f'"node":{node_text},"producer":{producer}}}'
            )
            if completed:
                self.counts[OK] += 1

    def _beside_send(
        self, type_: str, value: Any, process: int | str
    ) -> tuple[int, int | None, int] | None:
        """(key, offset, value) of a send op that goes beside: an invocation of one
        ["send", key, value], or the completion of a process whose invocation went there (a
        fail or info one repeats its invocation's arguments, whatever its value says); None:
        it goes into history.jsonl."""
        if type_ == INVOKE:
            if (
                isinstance(process, int)
                and isinstance(value, list)
                and len(value) == 1
                and isinstance(value[0], list)
                and len(value[0]) == 3
                and value[0][0] == "send"
                and all(isinstance(x, int) for x in value[0][1:])
            ):
                return value[0][1], None, value[0][2]
            return None
        sent = self._beside_open.get(process)  # type: ignore[arg-type]
        if sent is None:
            return None
        key, v = sent
        offset = None
        if type_ == OK:
            try:
                offset = value[0][2][0]
            except (TypeError, IndexError, KeyError):
                offset = None
        return key, offset if isinstance(offset, int) else None, v

    def _beside_record(
        self,
        type_: str,
        key: int,
        offset: int | None,
        value: int,
        process: int,
        node: str | None,
        producer: int,
        error: str | None,
    ) -> None:
        """One send op as a record of the side file (history/sidefiles.py SEND_DTYPE), its
        time taken under the lock it is written under, as a line's is."""
        with self._lock:
            if self._closed:
                return
            w = self._beside
            if w is None:
                self.side_dir.mkdir(parents=True, exist_ok=True)
                w = self._beside = SideWriter(self.side_dir / SENDS_SIDE_FILE, SENDS_TAG)
            if type_ == INVOKE:
                self._beside_open[process] = (key, value)
            else:
                self._beside_open.pop(process, None)
            node_at, error_at = w.string(node), w.string(error)
            now = time.monotonic_ns() - self._t0
            w.write_bytes(
                SEND_RECORD.pack(
                    now, time.time_ns() // 1000, process, producer, value,
                    -1 if offset is None else offset, key, error_at, node_at,
                    TYPE_CODES[type_],
                )
            )  # fmt: skip
            if type_ != INVOKE:
                self.counts[type_] += 1

    def invoke(
        self,
        f: str,
        value: Any,
        process: int | str,
        node: str | None = None,
        producer: int | None = None,
    ) -> dict:
        return self.record(INVOKE, f, value, process, node, producer=producer)

    def ok(self, f: str, value: Any, process: int | str, node: str | None = None) -> dict:
        return self.record(OK, f, value, process, node)

    def fail(
        self, f: str, value: Any, process: int | str, error: str, node: str | None = None
    ) -> dict:
        return self.record(FAIL, f, value, process, node, error)

    def info(
        self, f: str, value: Any, process: int | str, error: str, node: str | None = None
    ) -> dict:
        return self.record(INFO, f, value, process, node, error)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._writer.close()
            if self._beside is not None:
                self._beside.close()
