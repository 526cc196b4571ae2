"""The data-log checks of one run directory: `data/` (clusters/data_logs.py), as DataLog arrays
(parse.py), against the history's sends as arrays (sends.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.core.findings import Finding
from checkers.families.data_log.acks import acked_findings, scan_acked
from checkers.families.data_log.fencing import stale_batches, stale_findings, stale_values
from checkers.families.data_log.log import DataLog
from checkers.families.data_log.parse import DataLogError, read_data_logs
from checkers.families.data_log.protocol import protocol_note
from checkers.families.data_log.resent import appended_twice, resent_findings
from checkers.families.data_log.sends import Sends
from history.format import DATA_LOGS_DIR


@dataclass
class DataLogResult:
    logs: dict[str, DataLog] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


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


def check_run_data(
    run_dir: str | Path, sends: Sends | Iterable[dict[str, Any]]
) -> DataLogResult | None:
    """None when the run has no `data/` directory; an unreadable log is one unknown finding."""
    read = read_run_data(run_dir)
    return None if read is None else check_data_logs(read, sends)


def check_data_logs(read: DataLogRead, sends: Sends | Iterable[dict[str, Any]]) -> DataLogResult:
    """`sends`: the history's sends as arrays (Sends.from_parquet), or its send/txn op rows as
    dicts. Every rule runs over every log at once; only the values a finding cites are looked
    up for the ops that sent them (none, in a run without findings)."""
    if read.error is not None:
        return _unreadable(read.error)
    if not isinstance(sends, Sends):
        sends = Sends.from_rows(sends)
    logs = read.logs
    result = _with_log_notes(logs)
    stale = stale_batches(logs)
    twice = appended_twice(logs)
    scan = scan_acked(logs, sends)
    op_of_value = sends.ops_of(stale_values(stale) | {v for _, v, _ in twice})
    result.findings = stale_findings(stale, op_of_value)
    result.findings += resent_findings(twice, op_of_value)
    acked, notes = acked_findings(scan, sends)
    result.findings += acked
    result.notes += notes
    return _summed(result)


def _with_log_notes(logs: dict[str, DataLog]) -> DataLogResult:
    result = DataLogResult(logs)
    for log in logs.values():
        result.notes.extend(log.notes)
        if log.odd:
            shown = "; ".join(
                f"offset {int(log.offsets[r])}: {t!r}" for r, t in list(log.odd.items())[:3]
            )
            result.notes.append(
                f"data logs: {log.node} holds {len(log.odd)} record(s) of {log.topic} whose "
                f"payload is not a decimal integer (no kchaos value; never judged): {shown}"
            )
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
    batches = sum(len(log) for log in logs.values())
    result.notes.append(f"data logs: {batches} batches in {len(logs)} brokers' final logs")
    return result
