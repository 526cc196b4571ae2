"""Waiting until the cluster is observed ready, saying what is still missing every few seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from clusters.capabilities import Process
from clusters.cluster import Cluster, ClusterInfo

READY_REPORT_EVERY_S = 10.0


def wait_observed_ready(
    dc: Cluster[Process], info: ClusterInfo, why: str, timeout: float, say: Callable[[str], None]
) -> None:
    """Returns once every node reports ready (clusters/readiness.py); raises on ``timeout``."""
    from clusters.readiness import wait_ready

    say(f"waiting until the cluster is observed ready {why}")
    t0 = time.monotonic()
    said = [t0]

    def on_poll(status: dict[str, Any], problems: list[str]) -> None:
        now = time.monotonic()
        if problems and now - said[0] >= READY_REPORT_EVERY_S:
            said[0] = now
            say(f"  {now - t0:.0f} s, not yet: {'; '.join(problems[:3])}")

    wait_ready(dc, info, timeout=timeout, on_poll=on_poll)
    say(f"cluster ready {why} ({time.monotonic() - t0:.0f} s)")
