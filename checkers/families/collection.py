"""What the run's final collection could not collect (collection.json, history/collection.py),
said where the verdict is read: a note per failure, and one ``evidence-not-collected`` finding
(unknown) per failure whose files some check needed, naming those checks.

A check that finds no decoded metadata or data logs judges nothing and says so quietly; without
this, a run whose collection failed could come out VALID on what the history alone shows. Its
verdict is UNKNOWN instead, for that stated reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkers.core.findings import Finding
from history.collection import COLLECTION_JSON, DATA_LOGS, METADATA_LOGS, NODE_LOGS, WHOLE

# The checks (checkers/registry.py names) that read each collected part.
NEEDED_BY: dict[str, tuple[str, ...]] = {
    METADATA_LOGS: ("metadata-logs", "eligible-leaders", "durability"),
    DATA_LOGS: ("data-logs", "durability"),
    NODE_LOGS: ("metadata-logs", "zk-controller"),
}
NEEDED_BY[WHOLE] = tuple(dict.fromkeys(c for cs in NEEDED_BY.values() for c in cs))
PARTS = {
    METADATA_LOGS: "the decoded metadata logs (metadata/)",
    DATA_LOGS: "the brokers' decoded partition logs (data/)",
    NODE_LOGS: "the nodes' logs (logs/)",
    WHOLE: "the collection (logs/, metadata/, data/)",
}
RULE = (
    "a check judges only the evidence it reads: where the run's final collection of that "
    "evidence failed, its verdict is unknown, not valid"
)


def collection_failures(failed: Iterable[dict[str, Any]]) -> tuple[list[Finding], list[str]]:
    """One note per failure, and one unknown finding per failure some check needed."""
    findings, notes = [], []
    for e in failed:
        what = e.get("what", WHOLE)
        nodes = e.get("nodes")
        of = f" of {', '.join(nodes)}" if nodes else " of every node"
        part = PARTS.get(what, PARTS[WHOLE])
        said = f"{part}{of} not collected: {e.get('why')}"
        notes.append(f"collection: {said} ({COLLECTION_JSON})")
        checks = NEEDED_BY.get(what, NEEDED_BY[WHOLE])
        findings.append(
            Finding(
                "evidence-not-collected",
                None,
                (),
                f"{said}; the checks that read it ({', '.join(checks)}) could not judge with it. "
                f"Rule: {RULE}",
                {
                    "what": what,
                    "nodes": nodes,
                    "why": e.get("why"),
                    "checks": list(checks),
                    "rule": RULE,
                },
                unknown=True,
            )
        )
    return findings, notes
