"""The ZooKeeper-mode controller-epoch checks of one run directory: `logs/<node>/stdout.log`."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from checkers.core.findings import Finding
from checkers.core.run_files import read_cluster
from checkers.families.observer_samples import Sample
from checkers.families.zk_controller.parse import Event, read_logs
from checkers.families.zk_controller.rules import overlaps, reused_epochs, stale_epochs, summarize


@dataclass
class ZkResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    checked: bool = False


def zk_brokers(cluster: dict[str, Any]) -> list[str] | None:
    """The broker names of a run with ZooKeeper-mode brokers (zk, and a migration's ZooKeeper
    phases), from its cluster.json; None for any other topology or no cluster.json."""
    if cluster.get("topology") not in ("zk", "migration"):
        return None
    nodes = cluster.get("nodes") or []
    return [n["name"] for n in nodes if "broker" in (n.get("roles") or []) and "name" in n]


def active_overlap_note(samples: list[Sample]) -> str | None:
    """The longest time two brokers both reported ActiveControllerCount=1, from observer samples.

    Successive samples of one node saying active bound a span from the first's completion to the
    last's invocation. ZooKeeper mode has no Raft epoch to tie a span to, hence only a note.
    """
    spans: list[tuple[int, int, Sample, Sample]] = []
    current: dict[str, list[Sample]] = {}
    # ZooKeeper's controller is a broker; in a migration the KRaft controllers' own count says
    # they lead the KRaft quorum, not that they hold /controller.
    samples = [s for s in samples if "broker" in s.value.get("roles", ["broker"])]
    for s in [*samples, None]:
        ended = list(current) if s is None else [s.node] if s.node in current else []
        active = s is not None and bool(s.value.get("active_controller_count"))
        for node in ended if not active else []:
            run = current.pop(node)
            if run[-1].invoke_time > run[0].time:
                spans.append((run[0].time, run[-1].invoke_time, run[0], run[-1]))
        if s is not None and active:
            current.setdefault(s.node, []).append(s)
    best: tuple[int, Any, Any] | None = None
    for a, b in combinations(spans, 2):
        if a[2].node == b[2].node:
            continue
        overlap = min(a[1], b[1]) - max(a[0], b[0])
        if overlap > 0 and (best is None or overlap > best[0]):
            best = (overlap, a, b)
    if best is None:
        return None
    overlap, a, b = best
    return (
        f"observer: {a[2].node} and {b[2].node} both reported ActiveControllerCount=1 for "
        f"{overlap / 1e9:.3f} s ({a[2].node} from {a[2].cite()} to {a[3].cite()}, {b[2].node} "
        f"from {b[2].cite()} to {b[3].cite()}); judged by the controller epochs in the logs"
    )


def check_run_zk(run_dir: str | Path, samples: list[Sample]) -> ZkResult | None:
    """None unless the run directory holds a ZooKeeper-mode cluster (cluster.json)."""
    d = Path(run_dir)
    brokers = zk_brokers(read_cluster(d))
    if brokers is None:
        return None
    return check_zk_logs(brokers, read_logs(d, brokers), samples)


def check_zk_logs(
    brokers: list[str], by_node: dict[str, list[Event]], samples: list[Sample]
) -> ZkResult:
    """`by_node`: the events of the brokers' logs (parse.read_logs), for the `brokers` that
    cluster.json names."""
    result = ZkResult()
    missing = sorted(set(brokers) - set(by_node))
    if missing:
        result.notes.append(f"controller epochs: no log of {', '.join(missing)}")
    summary = summarize(by_node)
    result.stats = summary.stats()
    if not summary.elections and not summary.accepted:
        result.findings.append(
            Finding(
                "zk-controller-epochs-unknown",
                None,
                (),
                "no controller election and no broker acting on a controller request in "
                f"{len(by_node)} broker log(s): controller epochs cannot be judged",
                unknown=True,
            )
        )
        return result
    result.checked = True
    for events in by_node.values():
        result.findings += stale_epochs(events)
    result.findings += reused_epochs(e for es in by_node.values() for e in es)
    s = result.stats
    result.notes.append(
        f"controller epochs: {s['elections']} elections (epochs {s['epochs']}, {s['failovers']} "
        f"failovers); brokers acted on {s['requests_accepted']} controller requests and refused "
        f"{s['requests_refused_as_stale']} as stale"
    )
    result.notes += overlaps(by_node)
    note = active_overlap_note(samples)
    if note:
        result.notes.append(note)
    return result
