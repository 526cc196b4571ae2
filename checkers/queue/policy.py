"""Which queue anomalies make a run invalid, and why the others are tolerated.

Jepsen's Kafka checker tolerates some anomaly kinds because Kafka never promised otherwise
(jepsen.tests.kafka/allowed-error-types); a finding keeps its kind and carries the reason.
"""

from __future__ import annotations

from dataclasses import replace

from checkers.findings import Finding

ALWAYS_TOLERATED = {
    "int-send-skip": (
        "Kafka does not isolate writes: other producers' sends interleave with a "
        "transaction's sends to the same partition"
    ),
}
SUBSCRIBE_TOLERATED = {
    kind: (
        "consumers subscribe: a consumer-group rebalance moves partitions between consumers, "
        "which resume from the group's committed offset, so a consumer's next poll of a "
        "partition may skip ahead or go back"
    )
    for kind in ("poll-skip", "nonmonotonic-poll")
}

QUEUE_KINDS = (
    "lost-write",
    "duplicate",
    "inconsistent-offsets",
    "unseen",
    "poll-skip",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "int-send-skip",
    "int-nonmonotonic-send",
    "G1a",
    "precommitted-read",
    "garbage-read",
    "fenced-producer-read",
)


def tolerance(kind: str, subscribe: bool) -> str | None:
    if kind in ALWAYS_TOLERATED:
        return ALWAYS_TOLERATED[kind]
    if subscribe and kind in SUBSCRIBE_TOLERATED:
        return SUBSCRIBE_TOLERATED[kind]
    return None


def apply_policy(findings: list[Finding], subscribe: bool) -> list[Finding]:
    return [replace(f, tolerated=tolerance(f.kind, subscribe)) for f in findings]
