"""Node handles under the name other folders have imported them by (harness/migration.py, bench/,
tests): the capabilities are declared in clusters/capabilities.py, Docker's implementation is in
clusters/docker_node.py. New code imports from those two; nothing in clusters/ imports this.
"""

from __future__ import annotations

from clusters.capabilities import (
    Controllable,
    Exec,
    ExecResult,
    Files,
    Frozen,
    Host,
    Logs,
    Node,
    Pause,
    Process,
    Shell,
)
from clusters.docker_node import DockerNode

__all__ = [
    "Controllable",
    "DockerNode",
    "Exec",
    "ExecResult",
    "Files",
    "Frozen",
    "Host",
    "Logs",
    "Node",
    "Pause",
    "Process",
    "Shell",
]
