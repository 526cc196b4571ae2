"""The Kafka nodes' own logs as a run keeps them (`logs/<node>/stdout.log`): where each is, and
the line layout every Kafka release writes (log4j's `[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message`).
Containers log in UTC; checks compare stamps with each other and with the history's wall
clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from history.format import LOGS_DIR, NODE_LOG

# The stamp, the level and the message of a line that starts one (a stack trace's lines don't).
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ([A-Z]+) (.*)$")


def wall_of(stamp: str) -> float:
    """A line's stamp (LINE's first group) as seconds since the epoch."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()


def node_log(run_dir: str | Path, node: str) -> tuple[Path, str]:
    """The node's log file, and how findings cite it (relative to the run directory)."""
    return Path(run_dir) / LOGS_DIR / node / NODE_LOG, f"{LOGS_DIR}/{node}/{NODE_LOG}"
