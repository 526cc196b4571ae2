"""The data-log checks of one run directory: `data/<broker>.txt` (clusters/data_logs.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkers.core.findings import Finding
from checkers.families.data_log.acks import acked_findings, acked_other_writes, scan_acked
from checkers.families.data_log.attribution import send_mops
from checkers.families.data_log.fencing import (
    stale_batches,
    stale_findings,
    stale_producer_writes,
    stale_values,
)
from checkers.families.data_log.parse import DataLog, DataLogError, read_data_logs
from checkers.families.data_log.protocol import protocol_note
from checkers.families.data_log.resent import appended_twice, resent_findings
from checkers.scan.op_stream import OpRows, select, where_in
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
    """`op_rows`: the history's send/txn op rows, every column (to name the ops of a batch).
    Holds every row as a dict: `check_data_log_ops` answers the same from an Arrow table."""
    if read.error is not None:
        return _unreadable(read.error)
    logs = read.logs
    result = _with_log_notes(logs)
    op_of_value = ops_of_values(op_rows)
    result.findings = stale_producer_writes(logs, op_of_value)
    result.findings += resent_findings(appended_twice(logs), op_of_value)
    acked, notes = acked_other_writes(logs, op_rows, op_of_value)
    result.findings += acked
    result.notes += notes
    return _summed(result)


# The op columns the data-log checks read: to find the acknowledged sends, and to name the ops
# that sent the values a finding cites.
SEND_COLUMNS = ("index", "invoke_index", "type", "f", "process", "value", "value_json")


def check_data_log_ops(read: DataLogRead, ops: pa.Table) -> DataLogResult:
    """`check_data_logs` of the send/txn op rows as an Arrow table (RunInputs.op_table), with
    the same findings and notes, in memory that does not grow with the sends: one pass decodes
    the ok completions a batch at a time, and only the values a finding cites are looked up in
    a second pass (none, in a run without findings)."""
    if read.error is not None:
        return _unreadable(read.error)
    logs = read.logs
    result = _with_log_notes(logs)
    ops = select(ops, SEND_COLUMNS)
    stale = stale_batches(logs)
    scan = scan_acked(logs, OpRows(where_in(ops, "type", ["ok"])))
    twice = appended_twice(logs)
    wanted = stale_values(stale) | scan.other_values() | {v for _, v, _ in twice}
    op_of_value, rows = ops_of_wanted(OpRows(ops), wanted)
    result.findings = stale_findings(stale, op_of_value)
    result.findings += resent_findings(twice, op_of_value)
    acked, notes = acked_findings(scan, logs, rows, op_of_value)
    result.findings += acked
    result.notes += notes
    return _summed(result)


def ops_of_wanted(
    op_rows: Iterable[dict[str, Any]], wanted: set[int]
) -> tuple[dict[int, int], dict[int, dict[str, Any]]]:
    """`ops_of_values` for the `wanted` values only, and the op rows it names, by index.
    `op_rows` is read twice (an `OpRows`), and not at all when nothing is wanted."""
    if not wanted:
        return {}, {}
    invoked: dict[int, int] = {}  # value -> its invocation, the last one as ops_of_values
    rows: dict[int, dict[str, Any]] = {}
    for r in op_rows:
        if r.get("type") != "invoke" or r.get("f") not in ("send", "txn"):
            continue
        for _, _, value in send_mops(r):
            if isinstance(value, int) and value in wanted:
                invoked[value] = r["index"]
                rows[r["index"]] = r
    if not invoked:
        return {}, {}
    invocations = set(invoked.values())
    done: dict[int, int] = {}
    for r in op_rows:
        if r.get("invoke_index") in invocations:
            done[r["invoke_index"]] = r["index"]
            rows[r["index"]] = r
    return {v: done.get(i, i) for v, i in invoked.items()}, rows


def _with_log_notes(logs: dict[str, DataLog]) -> DataLogResult:
    result = DataLogResult(logs)
    for log in logs.values():
        result.notes.extend(log.notes)
    return result


def _unreadable(e: DataLogError) -> DataLogResult:
    return DataLogResult(
        findings=[Finding("data-log-unreadable", None, (), str(e), unknown=True)],
        notes=[str(e)],
    )


def _summed(result: DataLogResult) -> DataLogResult:
    logs = result.logs
    protocol = protocol_note(logs)
    if protocol:
        result.notes.append(protocol)
    batches = sum(len(bs) for log in logs.values() for bs in log.partitions.values())
    result.notes.append(f"data logs: {batches} batches in {len(logs)} brokers' final logs")
    return result
