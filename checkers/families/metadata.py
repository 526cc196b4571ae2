"""KRaft metadata safety from observer samples (f = observe, docs/history.md).

A sample was taken somewhere between its invocation and its completion, so a node is only
known to have been in a state at some instant of that interval. Every rule below uses the
narrowest claim the samples prove, and cites the samples and the KIP sentence it rests on.
"""

from __future__ import annotations

from itertools import combinations, pairwise
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.families.migration import observed_migration_regressions, observed_migration_skips
from checkers.families.observer_samples import Freeze, MetadataInput, Sample

RULES = {
    "split-brain": (
        'KIP-631: "The leader of the controller quorum will be the active controller"; '
        'KIP-500: the controller nodes "elect a leader from amongst themselves" with Raft, '
        "which elects at most one leader per epoch, and every node agrees who it is"
    ),
    "multiple-active-controllers": (
        'KIP-500: "The leader of the metadata log is called the active controller"; '
        'KIP-631: "The followers will function as hot standbys": one active controller at a '
        "time, beyond the moment a deposed leader takes to notice"
    ),
    "epoch-regression": (
        'KIP-631: changes are "guaranteed not to lose ... as long as we uphold the Raft '
        "invariants\"; a Raft node's epoch is persisted and never decreases"
    ),
    "high-watermark-regression": (
        'KIP-631: once "the metadata log\'s last stable offset" passes a change, "we are '
        "guaranteed not to lose the change\": a node's committed offset never moves back"
    ),
}
# controller.quorum.fetch.timeout.ms defaults to 2 s: a leader cut off from the quorum may
# believe it leads that long before resigning.
DEFAULT_TOLERANCE_NS = 2_000_000_000


def check_metadata(data: MetadataInput, tolerance_ns: int = DEFAULT_TOLERANCE_NS) -> list[Finding]:
    findings = _split_brain(data.samples)
    findings += _active_controllers(data.samples, data.freezes, tolerance_ns)
    findings += _regressions(data)
    findings += observed_migration_regressions(data)
    findings += observed_migration_skips(data)
    return sorted(findings, key=Finding.sort_key)


def _finding(kind: str, samples: list[Sample], text: str, **data: Any) -> Finding:
    return Finding(
        kind,
        None,
        tuple(s.index for s in samples),
        f"{text}. Rule: {RULES[kind]}",
        {"rule": RULES[kind], **data},
    )


def _split_brain(samples: list[Sample]) -> list[Finding]:
    out = []
    by_epoch: dict[int, dict[str, Sample]] = {}
    views: dict[int, dict[int, Sample]] = {}
    for s in samples:
        epoch = s.raft("epoch")
        if not isinstance(epoch, int):
            continue
        if s.raft("state") == "leader":
            by_epoch.setdefault(epoch, {}).setdefault(s.node, s)
        leader = s.raft("leader")
        if isinstance(leader, int) and leader >= 0:
            views.setdefault(epoch, {}).setdefault(leader, s)
    for epoch, leaders in sorted(by_epoch.items()):
        if len(leaders) > 1:
            cited = list(leaders.values())
            out.append(
                _finding(
                    "split-brain",
                    cited,
                    f"{len(cited)} nodes were Raft leader in epoch {epoch}: "
                    + "; ".join(f"{s.node} said state=leader in {s.cite()}" for s in cited),
                    epoch=epoch,
                    nodes=sorted(leaders),
                )
            )
    for epoch, seen in sorted(views.items()):
        if len(seen) > 1 and epoch not in {e for e, ls in by_epoch.items() if len(ls) > 1}:
            cited = list(seen.values())
            out.append(
                _finding(
                    "split-brain",
                    cited,
                    f"nodes disagree on the leader of epoch {epoch}: "
                    + "; ".join(
                        f"{s.node} named leader {s.raft('leader')} in {s.cite()}" for s in cited
                    ),
                    epoch=epoch,
                    leaders=sorted(seen),
                )
            )
    return out


def _active_runs(samples: list[Sample]) -> list[list[Sample]]:
    """Per node, maximal runs of successive samples reporting it active in one Raft epoch.

    A Raft leader keeps its epoch until it steps down and never leads that epoch again, so
    a node active in epoch e at two instants was active throughout between them.
    """
    runs: list[list[Sample]] = []
    current: dict[str, list[Sample]] = {}
    for s in samples:
        count, epoch = s.value.get("active_controller_count"), s.raft("epoch")
        if "controller" not in s.value.get("roles", ["controller"]):
            # A ZooKeeper-mode broker of a migration may report ActiveControllerCount 1 (it is
            # ZooKeeper's controller) and, migration enabled, the KRaft quorum's epoch as an
            # observer: that is not KRaft leadership.
            count = 0
        run = current.get(s.node)
        if run is not None and not (count and run[0].raft("epoch") == epoch):
            runs.append(current.pop(s.node))
        if isinstance(count, int) and count >= 1 and isinstance(epoch, int):
            current.setdefault(s.node, []).append(s)
    return runs + list(current.values())


def _running_pieces(
    lo: int, hi: int, nodes: tuple[str, str], freezes: list[Freeze]
) -> list[tuple[int, int]]:
    """[lo, hi] without the spans in which either node may have been stopped by SIGSTOP."""
    cuts = sorted(
        (f.start, hi if f.end is None else f.end)
        for f in freezes
        if any(f.covers(n) for n in nodes)
    )
    pieces, at = [], lo
    for start, end in cuts:
        if start > at:
            pieces.append((at, min(start, hi)))
        at = max(at, end)
        if at >= hi:
            break
    if at < hi:
        pieces.append((at, hi))
    return [(a, b) for a, b in pieces if b > a]


def _active_controllers(
    samples: list[Sample], freezes: list[Freeze], tolerance_ns: int
) -> list[Finding]:
    out = []
    for s in samples:
        count = s.value.get("active_controller_count")
        if isinstance(count, int) and count > 1:
            out.append(
                _finding(
                    "multiple-active-controllers",
                    [s],
                    f"{s.node} reported active_controller_count={count} in {s.cite()}",
                )
            )
    # Surely active from the first sample's completion to the last one's invocation.
    spans = [
        (run[0].time, run[-1].invoke_time, run)
        for run in _active_runs(samples)
        if run[-1].invoke_time > run[0].time
    ]
    for (s1, e1, r1), (s2, e2, r2) in combinations(spans, 2):
        a, b = r1[0].node, r2[0].node
        if a == b or min(e1, e2) <= max(s1, s2):
            continue
        # A stopped JVM neither acts nor notices it was deposed: each time it runs again it
        # gets the tolerance afresh, so only a stretch in which both ran counts.
        lo, hi = max(s1, s2), min(e1, e2)
        pieces = _running_pieces(lo, hi, (a, b), freezes)
        if not pieces:
            continue
        p_lo, p_hi = max(pieces, key=lambda p: p[1] - p[0])
        overlap = p_hi - p_lo
        if overlap > tolerance_ns:
            stopped = (hi - lo) - sum(q - p for p, q in pieces)
            aside = (
                f" (of {(hi - lo) / 1e9:.3f} s together, {stopped / 1e9:.3f} s with one of them "
                "possibly stopped by SIGSTOP do not count)"
                if stopped
                else ""
            )
            out.append(
                _finding(
                    "multiple-active-controllers",
                    [r1[0], r1[-1], r2[0], r2[-1]],
                    f"{a} and {b} were both active controller for {overlap / 1e9:.3f} s "
                    f"({secs(p_lo)}-{secs(p_hi)}), more than the {tolerance_ns / 1e9:g} s "
                    f"tolerated{aside}: {a} from {r1[0].cite()} to {r1[-1].cite()}, "
                    f"{b} from {r2[0].cite()} to {r2[-1].cite()}",
                    overlap_s=overlap / 1e9,
                    tolerance_s=tolerance_ns / 1e9,
                )
            )
    return out


def _regressions(data: MetadataInput) -> list[Finding]:
    out = []
    by_node: dict[str, list[Sample]] = {}
    for s in data.samples:
        by_node.setdefault(s.node, []).append(s)
    for node, samples in sorted(by_node.items()):
        for a, b in pairwise(samples):
            window = (a.invoke_time, b.time)
            e1, e2 = a.raft("epoch"), b.raft("epoch")
            if (
                isinstance(e1, int)
                and isinstance(e2, int)
                and e2 < e1
                and not data.disrupted(node, *window, data_loss=True)
            ):
                out.append(
                    _finding(
                        "epoch-regression",
                        [a, b],
                        f"{node} reported Raft epoch {e1} in {a.cite()}, then {e2} in {b.cite()}",
                        node=node,
                        epochs=[e1, e2],
                    )
                )
            h1, h2 = a.raft("high_watermark"), b.raft("high_watermark")
            if (
                isinstance(h1, int)
                and isinstance(h2, int)
                and 0 <= h2 < h1
                and not data.disrupted(node, *window, data_loss=False)
            ):
                out.append(
                    _finding(
                        "high-watermark-regression",
                        [a, b],
                        f"{node} reported high watermark {h1} in {a.cite()}, then {h2} in "
                        f"{b.cite()}, with no fault or failed sample of {node} in between",
                        node=node,
                        high_watermarks=[h1, h2],
                    )
                )
    return out
