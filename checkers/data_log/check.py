"""The data-log checks of one run directory: `data/<broker>.txt` (clusters/data_logs.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.data_log.acks import acked_other_writes
from checkers.data_log.attribution import send_mops
from checkers.data_log.fencing import stale_producer_writes
from checkers.data_log.parse import DataLog, DataLogError, read_data_logs
from checkers.data_log.protocol import protocol_note
from checkers.findings import Finding
from history.format import DATA_LOGS_DIR


@dataclass
class DataLogResult:
    logs: dict[str, DataLog] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def ops_of_values(op_rows: list[dict[str, Any]]) -> dict[int, int]:
    """value -> the op that sent it: its completion, else its invocation (values are unique)."""
    done = {r["invoke_index"]: r["index"] for r in op_rows if r.get("invoke_index") is not None}
    out = {}
    for r in op_rows:
        if r.get("type") != "invoke" or r.get("f") not in ("send", "txn"):
            continue
        for _, _, value in send_mops(r):
            if isinstance(value, int):
                out[value] = done.get(r["index"], r["index"])
    return out


@dataclass
class DataLogRead:
    """A run's `data/` as read: every broker's log, or why they could not be read."""

    logs: dict[str, DataLog] = field(default_factory=dict)
    error: DataLogError | None = None


def read_run_data(run_dir: str | Path) -> DataLogRead | None:
    """None when the run has no `data/` directory."""
    d = Path(run_dir) / DATA_LOGS_DIR
    if not d.is_dir():
        return None
    try:
        return DataLogRead(read_data_logs(d))
    except DataLogError as e:
        return DataLogRead(error=e)


def check_run_data(run_dir: str | Path, op_rows: list[dict[str, Any]]) -> DataLogResult | None:
    """None when the run has no `data/` directory; an unreadable log is one unknown finding."""
    read = read_run_data(run_dir)
    return None if read is None else check_data_logs(read, op_rows)


def check_data_logs(read: DataLogRead, op_rows: list[dict[str, Any]]) -> DataLogResult:
    """`op_rows`: the history's send/txn op rows, every column (to name the ops of a batch)."""
    if read.error is not None:
        e = read.error
        return DataLogResult(
            findings=[Finding("data-log-unreadable", None, (), str(e), unknown=True)],
            notes=[str(e)],
        )
    logs = read.logs
    result = DataLogResult(logs)
    for log in logs.values():
        result.notes.extend(log.notes)
    op_of_value = ops_of_values(op_rows)
    result.findings = stale_producer_writes(logs, op_of_value)
    acked, notes = acked_other_writes(logs, op_rows, op_of_value)
    result.findings += acked
    result.notes += notes
    protocol = protocol_note(logs)
    if protocol:
        result.notes.append(protocol)
    batches = sum(len(bs) for log in logs.values() for bs in log.partitions.values())
    result.notes.append(f"data logs: {batches} batches in {len(logs)} brokers' final logs")
    return result
