"""`read-from-other-topic`: a consumer of the run's topic returned records of another topic.

The queue clients subscribe to, or assign partitions of, the run's topic alone
(`generator.topic`); a record of any other topic they are handed is never put in a poll's value
but listed in the op's `foreign` field, `[[topic, partition, offset, value], ...]`
(docs/history.md). A consumer returns records only of the partitions it was assigned, and those
are partitions of the topics it asked for: so any op with a non-empty `foreign` field is a
finding, whatever its outcome (the records were delivered all the same). The finding names the
op and the records (the first 8, and how many). Whether the broker served another topic's data
for the partition asked, or the client mixed up its fetch responses, the history cannot tell:
both are what this names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.scan.op_rows import row_fields
from history.format import FOREIGN_FIELD, INVOKE

# The ops that return records.
FOREIGN_FS = ("poll", "txn")

RULE = (
    "a consumer returns only records of the partitions it was assigned, partitions of the "
    "topics it subscribed to or assigned itself"
)


def foreign_reads(rows: Iterable[dict[str, Any]]) -> tuple[list[Finding], int]:
    """(findings, ops with foreign records) of op rows with f in FOREIGN_FS."""
    found = []
    for r in rows:
        if r["type"] == INVOKE:
            continue
        records = row_fields(r).get(FOREIGN_FIELD)
        if isinstance(records, list) and records:
            found.append(read_from_other_topic(r, records))
    return found, len(found)


def _record(rec: Any) -> str:
    if isinstance(rec, list) and len(rec) == 4:
        topic, partition, offset, value = rec
        return f"{topic!r} partition {partition} offset {offset} (value {value!r:.40})"
    return f"{rec!r:.60}"


def read_from_other_topic(row: dict[str, Any], records: list[Any]) -> Finding:
    head = records[:8]
    more = f" (and {len(records) - len(head)} more)" if len(records) > len(head) else ""
    return Finding(
        "read-from-other-topic",
        None,
        (int(row["index"]),),
        f"op {row['index']} ({row['f']}, process {row['process']}, {row['type']} at "
        f"{secs(row.get('time'))}) was handed {len(records)} record(s) of another topic than "
        f"the run's: {'; '.join(_record(r) for r in head)}{more}. Rule: {RULE}",
        {"records": records, "count": len(records), "rule": RULE},
    )
