"""Which queue anomalies make a run invalid, and why the others are tolerated.

Jepsen's Kafka checker tolerates some anomaly kinds because Kafka never promised otherwise
(jepsen.tests.kafka/allowed-error-types); a finding keeps its kind and carries the reason.
"""

from __future__ import annotations

from dataclasses import replace

from checkers.core.findings import Finding
from history.format import JEPSEN

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


# Jepsen's verdicts where they differ from kchaos's, for histories Jepsen wrote (the writer's
# rule is JEPSEN): docs/checkers.md, "kchaos and Jepsen".
JEPSEN_TOLERATED = {
    kind: (
        "Jepsen's history: jepsen.tests.kafka/allowed-error-types tolerates G1c when ww "
        "dependencies are inferred (its default), and the EDN does not say whether consumers "
        "read committed (at read_uncommitted a wr-only G1c is legal)"
    )
    for kind in ("G1c", "G1c-process", "G1c-realtime")
}


def for_writer(findings: list[Finding], after_abort: str) -> list[Finding]:
    """Jepsen's verdicts for Jepsen's histories: G1c tolerated, and `unseen` a failure rather
    than unknown (Jepsen's final polls read until caught up, so a value still unseen then is
    one its checker calls lost). kchaos's own histories keep kchaos's verdicts."""
    if after_abort != JEPSEN:
        return findings
    out = []
    for f in findings:
        if f.kind == "unseen":
            f = replace(f, unknown=False)
        elif f.kind in JEPSEN_TOLERATED and f.tolerated is None:
            f = replace(f, tolerated=JEPSEN_TOLERATED[f.kind])
        out.append(f)
    return out


def tolerance(kind: str, subscribe: bool) -> str | None:
    if kind in ALWAYS_TOLERATED:
        return ALWAYS_TOLERATED[kind]
    if subscribe and kind in SUBSCRIBE_TOLERATED:
        return SUBSCRIBE_TOLERATED[kind]
    return None


def apply_policy(findings: list[Finding], subscribe: bool) -> list[Finding]:
    return [replace(f, tolerated=tolerance(f.kind, subscribe)) for f in findings]
