"""The findings of an in-memory columnar history, without a run directory (tests, small runs).

Only what a history alone says: queue anomalies, cycles and observer samples, on the vectorised
path. A stored run is checked by checkers.api.check, which runs every registered checker.
"""

from __future__ import annotations

import pyarrow as pa

from checkers.core.findings import Finding
from checkers.families.cycles import find_cycles
from checkers.families.metadata import check_metadata
from checkers.families.observer_samples import observe_samples_from_ops
from checkers.families.queue.check import check_queue_table
from checkers.families.queue.policy import for_writer
from checkers.scan.queue_ops import queue_ops_from_table
from history.columnar import header_of, op_rows
from history.format import after_abort_rule


def check_table(
    table: pa.Table, slots: int | None = None, after_abort: str | None = None
) -> list[Finding]:
    """Every finding of an in-memory columnar history, on the pandas path (tests, small runs).
    `slots`: worker slots sharing transactional ids (a transactional run's concurrency);
    `after_abort`: the poll rule after aborts, by default the history header's."""
    rule = after_abort or after_abort_rule(header_of(table.schema))
    queue = check_queue_table(table, slots=slots, after_abort=rule)
    cycles = find_cycles(queue.edges, queue_ops_from_table(table))
    meta = check_metadata(observe_samples_from_ops(op_rows(table).to_pylist()))
    return for_writer(queue.findings + cycles, rule) + meta
