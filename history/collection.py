"""What a run's final collection could not collect, as both sides read it: the collection that
writes it (clusters/collect.py, harness/run/wrapup.py) and the checks that could not judge
without it (checkers/families/collection.py). docs/history.md, "Files beside the history".

``collection.json`` in the run directory: ``{"failed": [{"what", "nodes", "why"}, ...]}``, one
entry per collection that failed: ``what`` one of WHATS, ``nodes`` the nodes it failed for
(null: every node, the collection as a whole), ``why`` the error as the collector saw it. The
file is absent when nothing failed (and in runs collected before it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from history import strict_json

COLLECTION_JSON = "collection.json"
# What a failure names: the nodes' output and configuration (logs/), the decoded metadata logs
# (metadata/), the brokers' decoded partition logs (data/), or the collection as a whole (it
# stopped before it said which part).
NODE_LOGS, METADATA_LOGS, DATA_LOGS, WHOLE = "node-logs", "metadata-logs", "data-logs", "all"
WHATS = (NODE_LOGS, METADATA_LOGS, DATA_LOGS, WHOLE)


def failure(what: str, nodes: list[str] | None, error: BaseException | str) -> dict[str, Any]:
    """One entry: ``error`` as its type and message (a string as it is)."""
    if what not in WHATS:
        raise ValueError(f"collection failure of {what!r}: not among {WHATS}")
    why = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {"what": what, "nodes": sorted(nodes) if nodes is not None else None, "why": why}


def record_failures(run_dir: Path, failed: list[dict[str, Any]]) -> None:
    """Adds ``failed`` to the run directory's collection.json (made when first needed)."""
    if not failed:
        return
    path = run_dir / COLLECTION_JSON
    kept = read_failures(run_dir)
    path.write_text(strict_json.dumps({"failed": kept + failed}, indent=1) + "\n")


def read_failures(run_dir: Path) -> list[dict[str, Any]]:
    """The entries of the run directory's collection.json; none when it is absent. A file that
    does not read as the format says is itself one failure of the whole collection."""
    path = run_dir / COLLECTION_JSON
    if not path.is_file():
        return []
    try:
        got = json.loads(path.read_text())
        entries = got["failed"]
        if not isinstance(entries, list) or not all(_entry(e) for e in entries):
            raise ValueError("an entry is not {what, nodes, why}")
        return entries
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [failure(WHOLE, None, f"{COLLECTION_JSON} unreadable: {exc}")]


def _entry(e: Any) -> bool:
    return (
        isinstance(e, dict)
        and e.get("what") in WHATS
        and isinstance(e.get("why"), str)
        and (e.get("nodes") is None or all(isinstance(n, str) for n in e["nodes"]))
    )
