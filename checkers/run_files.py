"""The files a run directory holds beside its history (history/format.py names them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from history.format import CLUSTER_JSON


def read_cluster(run_dir: Path) -> dict[str, Any]:
    """`cluster.json` (topology, nodes and roles, timing); {} when absent or unreadable, which
    every rule that needs it treats as "not judged"."""
    try:
        cluster = json.loads((Path(run_dir) / CLUSTER_JSON).read_text())
    except (OSError, ValueError):
        return {}
    return cluster if isinstance(cluster, dict) else {}
