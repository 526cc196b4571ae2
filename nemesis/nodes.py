"""Small helpers for acting on several node handles: in parallel, checked, and waited on."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from clusters.capabilities import Exec, ExecResult, Node, Process
from clusters.errors import ClusterError
from nemesis.errors import NemesisError

T = TypeVar("T")
N = TypeVar("N", bound=Node)
P = TypeVar("P", bound=Process)


def on_each(nodes: Iterable[N], fn: Callable[[N], T]) -> dict[str, T]:
    """Runs ``fn`` on every node at once: a fault should land on its targets together."""
    nodes = list(nodes)
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        results = list(pool.map(fn, nodes))
    return {n.name: r for n, r in zip(nodes, results, strict=True)}


def run(node: Exec, cmd: list[str], ok_codes: tuple[int, ...] = (0,)) -> ExecResult:
    """Runs a command in the node; a failure names the node, the command and its stderr."""
    result = node.exec(cmd, timeout=30)
    if result.exit_code not in ok_codes:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise NemesisError(
            f"node {node.name}: '{' '.join(cmd)}' failed ({result.exit_code}): "
            f"{detail[-1] if detail else 'no output'}"
        )
    return result


def wait_for(
    what: str, probe: Callable[[], bool], timeout: float = 60, every: float = 0.1
) -> float:
    """Polls until ``probe`` holds; returns the seconds it took. Observed state, never a sleep."""
    start = time.monotonic()
    while not probe():
        if time.monotonic() - start > timeout:
            raise NemesisError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
    return round(time.monotonic() - start, 3)


def on_live(node: Process, act: Callable[[], T]) -> T | None:
    """``act`` on a node that may stop or restart meanwhile (a kill, a migration step): None if
    it went down (a namespace or JVM that is gone holds no fault), done again if it came back
    (its new namespace and JVM have none yet)."""
    try:
        return act()
    except (ClusterError, NemesisError):
        if not node.is_running():
            return None
        return act()


def split_running(nodes: Iterable[P]) -> tuple[list[P], list[str]]:
    """Running nodes, and the names of those that are not (killed by another fault, say).

    Faults act on the running ones and record the rest: a plan may kill a node and then pick it
    again for a pause, and failing the whole step for that would hide the first fault's effect.
    """
    running, down = [], []
    for n in nodes:
        (running if n.is_running() else down).append(n)
    return running, sorted(n.name for n in down)


def number(params: dict, key: str, default: float) -> float:
    """A numeric step parameter; a plan with a non-number there fails with the key named."""
    value = params.get(key, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise NemesisError(f"parameter {key} must be a number, got {value!r}") from None
