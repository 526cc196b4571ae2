"""The files a run directory holds beside its history (history/format.py names them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from history.format import CLUSTER_JSON, PLAN_JSON


def _mapping(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_cluster(run_dir: Path) -> dict[str, Any]:
    """`cluster.json` (topology, nodes and roles, timing); {} when absent or unreadable, which
    every rule that needs it treats as "not judged"."""
    return _mapping(Path(run_dir) / CLUSTER_JSON) or {}


def read_generator(run_dir: Path) -> dict[str, Any] | None:
    """`plan.json`'s `generator` (how clients chose and ran their operations); None when the
    directory has no readable plan (a Jepsen history, or a history file copied alone)."""
    plan = _mapping(Path(run_dir) / PLAN_JSON)
    gen = plan.get("generator") if plan is not None else None
    return gen if isinstance(gen, dict) else None
