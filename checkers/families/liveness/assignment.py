"""`group-unassigned`: the run's consumer group held no partition at all while its members
kept polling and a majority of the cluster was healthy, for longer than `Bounds.group_s`.

From the subscribers' own `rebalance` events (groups.py `windows`: a member's hold of a
partition runs from its `assigned` event to its `revoked` or `lost` event; a hold the history
does not end ends at its member's last op, since the close and a retired member's events are
not recorded). The group is *asked* from a member's subscribe to its last op, and *holds* while
any member's hold is open. A stretch asked and not held is a finding when it contains a healthy
stretch (health.py) longer than the bound: a coordinator on a healthy majority completes a
rebalance within a few session timeouts (KIP-848: the coordinator computes the target
assignment and reconciles each member; the classic protocol: JoinGroup and SyncGroup, a dead
member expelled after its session). Judged only in histories whose subscribers recorded
rebalance events at all (their listeners' fields); a member with no partitions is fine, the
group as a whole with none is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkers.core.findings import Finding
from checkers.families.groups import group_ops, subscribers, windows
from checkers.families.liveness.health import Stretch, healthy_within

GROUP_RULE = (
    "a consumer group whose coordinator and members are on a healthy majority completes its "
    "rebalance and assigns the subscribed partitions: KIP-848's coordinator reconciles every "
    "member to its target assignment, the classic protocol's JoinGroup/SyncGroup round hands "
    "out every partition and expels a dead member after its session timeout"
)


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _minus(
    spans: list[tuple[float, float]], holes: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    out = []
    for a, b in spans:
        cur = a
        for c, d in holes:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < b:
            out.append((cur, b))
    return out


def unassigned_groups(
    rows: Iterable[dict[str, Any]], spans: list[Stretch], bound: float
) -> tuple[list[Finding], bool]:
    """Findings, and whether the rule was judged (subscribers with rebalance events)."""
    rows = list(rows)
    members = subscribers(rows)
    if not members:
        return [], False
    ops, _ = group_ops(rows)
    ops = [o for o in ops if o.process in members]
    if not any(o.events for o in ops):
        return [], False
    last: dict[int, float] = {}
    first: dict[int, float] = {}
    for o in ops:
        last[o.process] = max(last.get(o.process, 0.0), o.time / 1e9)
        if o.f == "subscribe":
            first[o.process] = min(first.get(o.process, o.invoke_time / 1e9), o.invoke_time / 1e9)
    asked = _union([(first[p], last[p]) for p in first if p in last and last[p] > first[p]])
    held_spans, _, _ = windows(ops)
    held = _union(
        [
            (w.start / 1e9, (w.end / 1e9) if w.end is not None else last.get(w.process, 0.0))
            for w in held_spans
        ]
    )
    out = []
    for a, b in _minus(asked, held):
        healthy = healthy_within(spans, a, b, writes=False)
        if healthy is None or healthy[1] - healthy[0] <= bound:
            continue
        lo, hi = healthy
        out.append(
            Finding(
                "group-unassigned",
                None,
                (),
                f"the run's consumer group held no partition from {a:.3f} s to {b:.3f} s while "
                f"its {len(members)} member(s) kept polling; from {lo:.3f} s to {hi:.3f} s "
                f"({hi - lo:.1f} s, longer than the {bound:g} s bound) a connected majority of "
                f"brokers and controllers was healthy. Rule: {GROUP_RULE}",
                {
                    "rule": GROUP_RULE,
                    "unassigned_s": [round(a, 3), round(b, 3)],
                    "healthy_s": [round(lo, 3), round(hi, 3)],
                    "bound_s": bound,
                },
            )
        )
    return out, True
