"""KIP-996's pre-vote under the five-voter one-way layout (nemesis partition one-way-layout),
judged from the controllers' own Raft views in the observer's samples.

KIP-996: a prospective candidate first asks whether it would win, and "if not, it does not
increase its epoch"; followers reject pre-votes while they still fetch from a leader. Kafka's
RaftEventSimulationTest checks it with the layout this fault installs and a StableLeadership
invariant: the leader and its epoch do not change after the first election while a majority can
still reach the leader. Under the layout (the op's `one_way`: who sends no request to whom) a
voter L is *reachable from a majority* when a majority of voters, L itself included, send it
requests (followers fetch from the leader, and its check-quorum counts their fetches): voters 2,
3 and 4 (by node id) are, 0 and 1 are not.

Judged: each stretch from the layout's start (its ok completion) to its stop or heal, cut short
at the first other fault, upgrade or migration op (a kill, another partition or a restart
changes who reaches whom, which the history does not say). Everything is read from samples of
controllers whose Raft view held still (docs/history.md: `raft` is null otherwise).

- `leadership-unstable`: a sample shows an epoch above the current leader's while that leader
  was reachable from a majority. The current leader is the one the samples before the layout
  last saw leading the highest epoch they saw, then each newer leader a sample shows. One
  finding per stretch, with the number of further rises.
- `election-livelock`: no controller sample shows a leader for longer than the bound (the fetch
  timeout and LIVELOCK_TIMEOUTS election timeouts: 12 s in both of kchaos's timings), while
  every controller answered with its view in between; the layout always leaves a majority (2, 3
  and 4) that reach each other.

Both are KIP-996's, Kafka 4.0 and later: where some controller sampled in the stretch ran an
older release (3.9 has no pre-vote), what happened to the epoch is a note, not a finding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.families.feature_views import parse_version
from checkers.families.observer_samples import Sample
from checkers.scan.fault_windows import TIME, fault_windows

ONE_WAY = "one-way-layout"
PREVOTE_FROM = (4, 0)
# controller.quorum.fetch.timeout.ms and election.timeout.ms: Kafka's defaults, which kchaos's
# fast timing keeps (clusters/config.py FAST_KRAFT).
FETCH_TIMEOUT_NS = 2_000_000_000
ELECTION_TIMEOUT_NS = 1_000_000_000
LIVELOCK_TIMEOUTS = 10
BOUND_NS = FETCH_TIMEOUT_NS + LIVELOCK_TIMEOUTS * ELECTION_TIMEOUT_NS
KIP996 = (
    'KIP-996: a prospective candidate asks whether it would win an election, and "if not, it '
    'does not increase its epoch"; followers reject pre-votes while they still fetch from a '
    "leader (Kafka's RaftEventSimulationTest StableLeadership: the leader and epoch do not change "
    "after the first election while a majority can still reach the leader)"
)
RULES = {
    "leadership-unstable": KIP996,
    "election-livelock": (
        KIP996 + "; KIP-595 (Raft): a majority that can reach each other elects a leader within "
        f"election timeouts (bound here: the fetch timeout and {LIVELOCK_TIMEOUTS} election "
        "timeouts)"
    ),
}


@dataclass(frozen=True)
class Stretch:
    start: int  # ns: the layout in place (its start's ok completion)
    end: int | None  # ns: its stop or heal invoked, or the first other fault; None: the end
    layout: dict[str, list[str]]  # who sends no request to whom
    index: int  # the layout's start op

    def holds(self, s: Sample) -> bool:
        return self.start <= s.invoke_time and (self.end is None or s.time <= self.end)


@dataclass
class PreVoteResult:
    findings: list[Finding]
    notes: list[str]
    checked: bool


def reachable(layout: dict[str, list[str]], leader: str) -> bool:
    """Whether a majority of the voters, the leader included, send the leader requests."""
    senders = [v for v in layout if v == leader or leader not in layout[v]]
    return len(senders) >= len(layout) // 2 + 1


def stretches(fault_rows: list[dict[str, Any]], names: list[str]) -> tuple[list[Stretch], int]:
    """The layout's judged stretches, and how many layouts began under another fault."""
    faults = fault_windows(fault_rows, names, TIME)
    # Every other fault, heal, upgrade or migration op, as (from, to) in seconds.
    others = [(s, s.outer) for s in faults.spans] + [
        (None, (o.start, o.end)) for o, _ in faults.others
    ]
    out, skipped = [], 0
    for span in faults.spans:
        value = span.start.value if isinstance(span.start.value, dict) else {}
        layout = value.get("one_way")
        if span.kind != ONE_WAY or span.start.type != "ok" or not isinstance(layout, dict):
            continue
        start = span.start.end
        end = span.end.start if span.end is not None else math.inf
        met = [lo for s, (lo, hi) in others if s is not span and lo <= end and hi >= start]
        if any(lo <= start for lo in met):
            skipped += 1
            continue
        end = min([end, *met])
        out.append(
            Stretch(
                round(start * 1e9),
                None if math.isinf(end) else round(end * 1e9),
                {str(k): [str(x) for x in v] for k, v in layout.items() if isinstance(v, list)},
                span.start.invoke_index,
            )
        )
    return out, skipped


def _raft(s: Sample) -> tuple[str | None, int | None]:
    state, epoch = s.raft("state"), s.raft("epoch")
    return (state if isinstance(state, str) else None), (epoch if isinstance(epoch, int) else None)


def check_prevote(
    samples: list[Sample], fault_rows: list[dict[str, Any]], names: list[str]
) -> PreVoteResult:
    """Every stretch of the one-way layout, judged (module docstring)."""
    found, skipped = stretches(fault_rows, names)
    if not found and not skipped:
        return PreVoteResult([], [], False)
    notes = []
    if skipped:
        notes.append(f"pre-vote: {skipped} one-way layouts began under another fault: not judged")
    controllers = [s for s in samples if "controller" in (s.value.get("roles") or [])]
    findings: list[Finding] = []
    for st in found:
        inside = [s for s in controllers if st.holds(s)]
        versions = {parse_version(s.value.get("version")) for s in inside}
        judged = bool(inside) and all(v is not None and v >= PREVOTE_FROM for v in versions)
        before = [s for s in controllers if s.time < st.start]
        unstable, rises = _unstable(st, before, inside)
        livelock = _livelock(st, inside, {s.node for s in controllers})
        if judged:
            findings += unstable + livelock
        shown = ", ".join(sorted(".".join(map(str, v)) for v in versions if v)) or "unknown"
        epochs = [e for s in inside if (e := _raft(s)[1]) is not None]
        notes.append(
            f"pre-vote: the one-way layout (op {st.index}) held {secs(st.start)}-"
            f"{secs(st.end) if st.end is not None else 'the end'}: controllers ran {shown}; epochs "
            f"{min(epochs, default='?')}-{max(epochs, default='?')} in {len(inside)} samples, "
            f"{rises} rises while the leader was reachable from a majority"
            + ("" if judged else " (before Kafka 4.0 there is no pre-vote: not judged)")
        )
    return PreVoteResult(sorted(findings, key=Finding.sort_key), notes, True)


def _unstable(st: Stretch, before: list[Sample], inside: list[Sample]) -> tuple[list[Finding], int]:
    leader: str | None = None
    epoch: int | None = None
    seen: Sample | None = None
    top = max((e for s in before if (e := _raft(s)[1]) is not None), default=None)
    for s in before:
        state, e = _raft(s)
        if state == "leader" and e == top:
            leader, epoch, seen = s.node, e, s
    rises, first = 0, None
    for s in sorted(inside, key=lambda x: x.time):
        state, e = _raft(s)
        if e is None:
            continue
        if epoch is not None and e > epoch:
            if leader is not None and seen is not None and reachable(st.layout, leader):
                rises += 1
                first = first or (seen, s, leader, epoch)
            leader, epoch, seen = (s.node, e, s) if state == "leader" else (None, e, None)
        elif state == "leader" and (epoch is None or e >= epoch):
            leader, epoch, seen = s.node, e, s
    if first is None:
        return [], rises
    lead, bump, name, at = first
    text = (
        f"under the one-way layout (op {st.index}) {name} led epoch {at} ({lead.cite()}), and a "
        f"majority of the voters send it requests ({_senders(st.layout, name)}); yet "
        f"{bump.node} reported epoch {_raft(bump)[1]} in {bump.cite()}"
        + (f"; {rises - 1} more rises in this layout" if rises > 1 else "")
    )
    rule = RULES["leadership-unstable"]
    return [
        Finding(
            "leadership-unstable",
            None,
            (lead.index, bump.index),
            f"{text}. Rule: {rule}",
            {"rule": rule, "leader": name, "epoch": at, "rises": rises, "layout_op": st.index},
        )
    ], rises


def _senders(layout: dict[str, list[str]], leader: str) -> str:
    return ", ".join(sorted(v for v in layout if v == leader or leader not in layout[v]))


def _livelock(st: Stretch, inside: list[Sample], controllers: set[str]) -> list[Finding]:
    ordered = sorted(inside, key=lambda x: x.time)
    leads = [s for s in ordered if _raft(s)[0] == "leader"]
    marks: list[tuple[int, Sample | None]] = [(st.start, None)]
    marks += [(s.time, s) for s in leads]
    end = st.end if st.end is not None else (ordered[-1].time if ordered else st.start)
    marks.append((end, None))
    rule = RULES["election-livelock"]
    for (t0, a), (t1, b) in pairwise(marks):
        if t1 - t0 <= BOUND_NS:
            continue
        between = [s for s in ordered if t0 < s.invoke_time and s.time < t1]
        answered = {s.node for s in between if _raft(s)[1] is not None}
        if answered != controllers:
            continue  # some controller's view is unknown in the gap: it may have led
        ops = tuple(x.index for x in (a, b) if x is not None)
        return [
            Finding(
                "election-livelock",
                None,
                ops,
                f"under the one-way layout (op {st.index}) no controller sample showed a leader "
                f"from {secs(t0)} to {secs(t1)} ({(t1 - t0) / 1e9:.1f} s, more than "
                f"{BOUND_NS / 1e9:g} s) although every controller answered with its view in "
                f"between ({len(between)} samples) and voters "
                f"{', '.join(v for v in st.layout if reachable(st.layout, v))} reach each "
                f"other. Rule: {rule}",
                {"rule": rule, "from_s": t0 / 1e9, "to_s": t1 / 1e9, "layout_op": st.index},
            )
        ]
    return []
