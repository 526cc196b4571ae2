"""Every share-group check over one run (docs/checkers.md, "Share groups"): the finality rule
(finality.py), at-least-once against the final drain (at_least_once.py), lock exclusivity
(locks.py), delivery counts (counts.py), one poll's order (ordering.py), read_committed
(committed.py) and the start offsets (start_offsets.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from checkers.core.findings import Finding
from checkers.families.share.at_least_once import check_at_least_once
from checkers.families.share.committed import check_committed
from checkers.families.share.counts import check_counts
from checkers.families.share.finality import SHARE_OP_FS, redelivered_after_final
from checkers.families.share.locks import check_locks
from checkers.families.share.ordering import check_ordering
from checkers.families.share.run import FAULT_PROCESSES, OTHER_FS, ShareRun, read_run
from checkers.families.share.start_offsets import check_start_offsets

# The ops the checks read: the share ops, the sends, transactions and final log read, and the
# faults' and steps' (by process).
FS = tuple(sorted({*SHARE_OP_FS, *OTHER_FS}))
PROCESSES = FAULT_PROCESSES

CHECKS: tuple[Callable[[ShareRun], tuple[list[Finding], dict[str, int]]], ...] = (
    lambda run: redelivered_after_final(run.share),
    check_at_least_once,
    check_locks,
    check_counts,
    check_ordering,
    check_committed,
    check_start_offsets,
)


def check_share_run(
    rows: Iterable[Mapping[str, Any]], header: Mapping[str, Any], path: str = "history"
) -> tuple[list[Finding], dict[str, int]]:
    """(findings, stats) of a share run's op rows (FS, and PROCESSES') and its header."""
    run = read_run(rows, header, path)
    findings: list[Finding] = []
    stats: dict[str, int] = {}
    for check in CHECKS:
        found, s = check(run)
        findings += found
        stats.update(s)
    return findings, stats
