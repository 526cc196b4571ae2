"""Waiting until the cluster is observed ready, saying what is still missing every few seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from clusters.capabilities import Process
from clusters.cluster import Cluster, ClusterInfo

READY_REPORT_EVERY_S = 10.0

# What a lasting fault did to a node that may keep it down (nemesis/api.py Lasting.kept_down).
Lasting = Callable[[str], "dict[str, Any] | None"]


def wait_observed_ready(
    dc: Cluster[Process],
    info: ClusterInfo,
    why: str,
    timeout: float,
    say: Callable[[str], None],
    lasting: Lasting | None = None,
) -> dict[str, dict[str, Any]]:
    """Returns once every node reports ready (clusters/readiness.py); raises on ``timeout``.

    ``lasting``: asked of a node that is dead during the wait; a record (the fault that may
    keep it down) lets the wait go on without it. Returns those nodes with their records."""
    from clusters.readiness import KEPT_DOWN, wait_ready

    say(f"waiting until the cluster is observed ready {why}")
    t0 = time.monotonic()
    said = [t0]
    kept: dict[str, dict[str, Any]] = {}

    def on_poll(status: dict[str, Any], problems: list[str]) -> None:
        now = time.monotonic()
        if problems and now - said[0] >= READY_REPORT_EVERY_S:
            said[0] = now
            say(f"  {now - t0:.0f} s, not yet: {'; '.join(problems[:3])}")

    def may_stay_down(node: str) -> bool:
        if node not in kept and lasting is not None:
            record = lasting(node)
            if record is None:
                return False
            kept[node] = record
            say(f"  {node} stays down: {describe_kept(record)}")
        return node in kept

    status = wait_ready(
        dc, info, timeout=timeout, on_poll=on_poll, may_stay_down=may_stay_down if lasting else None
    )
    down = status.get(KEPT_DOWN) or []
    left = f", without {', '.join(down)}" if down else ""
    say(f"cluster ready {why}{left} ({time.monotonic() - t0:.0f} s)")
    return {n: kept[n] for n in down}


def describe_kept(record: dict[str, Any]) -> str:
    """One line for a kept-down record: which fault, on which file."""
    what = f"{record.get('fault')}:{record.get('kind')}"
    file = f" of {record['file']}" if record.get("file") else ""
    return f"a lasting fault ({what}{file}) keeps it from starting"
