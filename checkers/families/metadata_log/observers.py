"""Brokers' own copies of the metadata log (`metadata/observers/<node>.txt`) against the committed
log: two brokers holding different entries at one committed offset apply different state there.

A broker (a Raft observer) fetches from the leader like a follower, uncommitted entries
included, and truncates a deposed leader's tail when it next fetches. So a broker that differs
from the committed log at some offset and never agrees with it again may merely not have
fetched since: a note. Differing at a committed offset and then holding the same entry as the
committed log at a later offset breaks Raft's log matching (equal entries mean equal prefixes):
a finding. Observers are never counted toward a majority.
"""

from __future__ import annotations

from checkers.core.findings import Finding
from checkers.families.metadata_log.committed import CommittedBound
from checkers.families.metadata_log.parse import MetadataLog, Record
from checkers.families.metadata_log.rules import rejoin
from history.format import METADATA_DIR, OBSERVERS_DIR

RULE = (
    'KIP-500: "Multiple consumers can quickly catch up to the latest state simply by replaying '
    "all the events newer than their current offset. The log establishes a clear ordering "
    'between events, and ensures that the consumers always move along a single timeline": one '
    "offset names one entry on every broker"
)
KIND = "broker-metadata-divergence"
PREFIX = f"{METADATA_DIR}/{OBSERVERS_DIR}/"


def observer_divergence(
    observers: dict[str, MetadataLog],
    voter_logs: dict[str, MetadataLog],
    majority: CommittedBound,
    notes: list[str],
) -> list[Finding]:
    """Brokers whose log differs from the committed log at an offset <= `majority.last`."""
    out = []
    holders = [voter_logs[n] for n in majority.holders]
    for name, log in sorted(observers.items()):
        for offset in sorted(o for o in log.records if o <= majority.last):
            ref = next((h for h in holders if offset in h.records), None)
            if ref is None:  # before every holder's log start (snapshots): nothing to compare
                continue
            mine, committed = log.records[offset], ref.records[offset]
            if mine.same_entry(committed):
                continue
            again = rejoin(log, ref, offset)
            if again is None:
                notes.append(
                    f"broker {name}'s metadata log differs from the committed log from offset "
                    f"{offset} on and never agrees again: it has not fetched since a leader "
                    f"change ({mine.cite(PREFIX)} / {committed.cite()})"
                )
            else:
                out.append(_finding(name, mine, committed, log.records[again], ref.records[again]))
            break
    return out


def _finding(name: str, mine: Record, committed: Record, again: Record, ref: Record) -> Finding:
    cites = [
        mine.cite(PREFIX),
        committed.cite(),
        again.cite(PREFIX),
        ref.cite(),
    ]
    return Finding(
        KIND,
        None,
        (),
        f"broker {name} holds {mine.type} at committed offset {mine.offset} where the committed "
        f"log holds {committed.type} (written in epoch {committed.epoch}), yet the same entry as "
        f"the committed log at offset {again.offset}: it applies different state at offset "
        f"{mine.offset} than every broker that follows the committed log. Records: "
        + "; ".join(cites)
        + f". Rule: {RULE}",
        {"rule": RULE, "records": cites, "node": name, "offset": mine.offset},
    )
