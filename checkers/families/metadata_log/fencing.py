"""Lost fencing: a deposed controller's write that became part of the committed metadata log.

Every batch carries the Raft epoch of the leader that appended it (partitionLeaderEpoch). A
leader of epoch e' only ever appends after every entry it holds, and an entry of epoch e < e'
can only follow it if a leader of the older epoch e appended after the newer leader had
written: a stale leader whose writes should have been fenced. In the committed log that write
took effect.
"""

from __future__ import annotations

from typing import Any

from checkers.core.findings import Finding
from checkers.families.metadata_log.parse import Record

RULE = (
    'KIP-500: "The log establishes a clear ordering between events, and ensures that the '
    'consumers always move along a single timeline"; KIP-631: "The leader of the controller '
    'quorum will be the active controller": an entry of an older leader epoch committed after one '
    "of a newer epoch is a deposed leader's write"
)
KIND = "deposed-leader-write"


def deposed_leader_writes(committed: list[Record]) -> list[Finding]:
    """One finding per stale epoch that appears after a newer one in the committed log.

    `committed`: the committed entries in offset order (`committed.committed_log`).
    """
    out: list[Finding] = []
    newest: Record | None = None  # the first record of the highest epoch so far
    stale: dict[int, list[Record]] = {}  # stale epoch -> its records after `newest`
    for r in committed:
        if r.epoch < 0:  # no epoch recorded: says nothing about fencing
            continue
        if newest is None or r.epoch > newest.epoch:
            if newest is not None:
                out += _report(newest, stale)
            newest, stale = r, {}
        elif r.epoch < newest.epoch:
            stale.setdefault(r.epoch, []).append(r)
    return out + (_report(newest, stale) if newest is not None else [])


def _report(newest: Record, stale: dict[int, list[Record]]) -> list[Finding]:
    out = []
    for epoch, records in sorted(stale.items()):
        first = records[0]
        more = f" ({len(records)} committed records of epoch {epoch} in all)" if records[1:] else ""
        data: dict[str, Any] = {
            "rule": RULE,
            "records": [newest.cite(), first.cite()],
            "newer_epoch": newest.epoch,
            "stale_epoch": epoch,
            "offsets": [r.offset for r in records],
        }
        out.append(
            Finding(
                KIND,
                None,
                (),
                f"committed offset {first.offset} ({first.type}) was written in epoch {epoch} "
                f"after committed offset {newest.offset} of epoch {newest.epoch}: a deposed "
                f"leader's write took effect{more}. Records: {newest.cite()}; {first.cite()}. "
                f"Rule: {RULE}",
                data,
            )
        )
    return out
