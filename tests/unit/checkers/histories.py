"""A small builder for hand-written queue histories: each call is one op, invoke then completion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from history.columnar import write_parquet
from history.format import ASYNC_SEND_MODE, IDEMPOTENCE_FIELD, IN_FLIGHT_FIELD, SEND_MODE_FIELD
from history.reader import History, parse_history, read_history

SEC = 1_000_000_000
# What a pipelined run's header declares (workloads/pipelined.py history_header).
PIPELINED = {
    SEND_MODE_FIELD: ASYNC_SEND_MODE, IN_FLIGHT_FIELD: 5, IDEMPOTENCE_FIELD: True,
}  # fmt: skip


class H:
    def __init__(self, **header: Any) -> None:
        """`header`: further header fields (what the writer declares, history/format.py)."""
        self.header = header
        self.lines: list[dict[str, Any]] = []
        self.clock = 0

    def _tick(self) -> int:
        self.clock += SEC // 10
        return self.clock

    def invoke(self, process: Any, f: str, value: Any, **extra: Any) -> H:
        self.lines.append(
            {"type": "invoke", "f": f, "process": process, "time": self._tick(), "value": value,
             **extra}
        )  # fmt: skip
        return self

    def complete(self, process: Any, f: str, type_: str, value: Any, **extra: Any) -> H:
        self.lines.append(
            {"type": type_, "f": f, "process": process, "time": self._tick(), "value": value,
             **extra}
        )  # fmt: skip
        return self

    def op(self, process: Any, f: str, inv: Any, type_: str, out: Any, **extra: Any) -> H:
        return self.invoke(process, f, inv).complete(process, f, type_, out, **extra)

    def invoke_send(self, lane: int, producer: int, k: int, v: int) -> H:
        """A pipelined send's invocation (docs/history.md, "Pipelined sends")."""
        return self.invoke(lane, "send", [["send", k, v]], producer=producer)

    def complete_send(
        self, lane: int, producer: int, k: int, v: int, offset: int | None, type_: str = "ok"
    ) -> H:
        """A pipelined send's completion, from its delivery report."""
        out = [["send", k, [offset, v]]] if type_ == "ok" else [["send", k, v]]
        return self.complete(lane, "send", type_, out, producer=producer)

    def send(self, p: int, k: int, v: int, offset: int | None, type_: str = "ok") -> H:
        out = [["send", k, [offset, v]]] if type_ == "ok" else [["send", k, v]]
        return self.op(p, "send", [["send", k, v]], type_, out)

    def poll(self, p: int, reads: dict[int, list[tuple[int, int]]], type_: str = "ok",
             **extra: Any) -> H:  # fmt: skip
        out = [["poll", {str(k): [list(x) for x in xs] for k, xs in reads.items()}]]
        return self.op(p, "poll", [["poll"]], type_, out, **extra)

    def txn(self, p: int, inv: list[Any], out: list[Any], type_: str = "ok") -> H:
        return self.op(p, "txn", inv, type_, out)

    def assign(self, p: int, keys: list[int], f: str = "assign") -> H:
        return self.op(p, f, keys, "ok", keys)

    def observe(self, node: str, type_: str = "ok", **fields: Any) -> H:
        """One observer sample of `node`; `fields` override a healthy follower's value."""
        value = {
            "roles": ["controller"], "raft": {"state": "follower", "leader": 1, "epoch": 1,
            "high_watermark": 10}, "active_controller_count": 0, **fields,
        }  # fmt: skip
        self.lines.append(
            {"type": "invoke", "f": "observe", "process": "observer", "time": self._tick(),
             "node": node, "value": None}
        )  # fmt: skip
        return self.complete(
            "observer", "observe", type_, value if type_ == "ok" else None, node=node
        )

    def nemesis(self, f: str, value: Any) -> H:
        return self.op("nemesis", f, value, "ok", value)

    def crash(self, p: int) -> H:
        return self.op(p, "crash", None, "ok", None)

    def jsonl(self) -> bytes:
        header = {"kchaos_history": 1, "run": "test", "started_wall": 0.0, **self.header}
        rows = [header] + [{"index": i, **op} for i, op in enumerate(self.lines)]
        return "".join(json.dumps(r) + "\n" for r in rows).encode()

    def history(self) -> History:
        return parse_history(self.jsonl(), "<generated>")

    def write(self, directory: Path) -> Path:
        """Writes history.jsonl and history.parquet; returns the Parquet path."""
        path = directory / "history.jsonl"
        path.write_bytes(self.jsonl())
        return write_parquet(read_history(path), directory / "history.parquet")


def mixed_anomalies() -> H:
    """One small history holding many anomaly kinds at once (G1a, poll-skip, unseen, ...), for
    tests that compare two implementations of the checks on it."""
    return (
        H()
        .assign(1, [1, 2])
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .send(0, 1, 12, 2)
        .send(0, 4, 40, 0)
        .send(0, 2, 20, None, "fail")
        .txn(3, [["send", 2, 21], ["send", 3, 30]], [["send", 2, [0, 21]], ["send", 3, [0, 30]]],
             "info")
        .poll(1, {1: [(0, 10)], 2: [(0, 21), (1, 20)]})
        .poll(1, {1: [(2, 12), (1, 11)]})
        .txn(4, [["send", 3, 31], ["poll"]], [["send", 3, [1, 31]], ["poll", {"3": [[1, 31]]}]])
    )  # fmt: skip
