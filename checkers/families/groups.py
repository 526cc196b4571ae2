"""Consumer groups, from the subscribers' own ops (docs/history.md, "Consumer groups: rebalances
and commits"): which member held a partition when, and what the group committed.

A subscriber records, on the completion of the op during which its rebalance listener ran, each
event as `[event, [keys], time]` (`assigned`, `revoked` in an orderly rebalance, `lost` when it
learned it was fenced), and on an ok poll the offsets its synchronous commit stored. Keys are
partitions (key k is partition k of the run's topic). A process is one member: a retired
process p goes on as p + concurrency with a new consumer, a new member. A member's hold of a
partition, its *window*, runs from an `assigned` event to the next `revoked` or `lost` event of
that partition; a window the history does not close (the member's close is not recorded, nor
the events of a retired process) has no known end.

`group-double-owner`. Kafka hands a partition over in order: the previous owner revokes it
before the coordinator gives it to the next one.

- KIP-848 (the consumer protocol, https://cwiki.apache.org/confluence/display/KAFKA/KIP-848),
  reconciliation: "The group coordinator revokes the partitions which are no longer in the
  target assignment of the member", then "assigns the new partitions to the member ... while
  ensuring that partitions which are not revoked by other members yet are removed from this
  set. In other words, new partitions are incrementally assigned to the member when they are
  revoked by the other members." (Kafka's group coordinator holds such a member in
  UNRELEASED_PARTITIONS: "newly assigned partitions are still owned by other members in the
  group. They are not released yet.")
- The classic protocol, Kafka's ConsumerRebalanceListener: "Under normal conditions, if a
  partition is reassigned from one consumer to another, then the old consumer will always
  invoke onPartitionsRevoked for that partition prior to the new consumer invoking
  onPartitionsAssigned for the same partition." Its exception is onPartitionsLost: "the
  partitions may already be owned by some other members in the group".

So: member B was assigned partition p at a2; member A had been assigned p at a1 < a2 and had no
`revoked` or `lost` event for p in between; A's window ends with an explicit `revoked` at
r > a2 (an orderly handover, which had to come before a2); and A has a poll (a `poll` op, or a
poll in a `txn`) that returned records of p, invoked after a2 and completed before r. Then two
members consumed p at once, and the one that should have let go first says it let go in order,
later. Not judged, and why:

- a window ending in `lost`: A was fenced and learns it late, so it may fetch p after the
  coordinator gave p to B (the onPartitionsLost case above); no finding, whatever A polled;
- a window with no recorded end: nothing says how it ended;
- an overlap in which A polled nothing of p: no record was consumed twice. Counted in a note
  (the listener order alone is broken there, but the harm this rule names did not happen);
- an event whose time lies outside its op's invocation and completion: the clocks disagree, so
  the event says nothing; it ends its member's window as an unknown end would (a note counts
  them);
- an event that cannot be read (the reader refuses them; a Parquet file written otherwise may
  hold one): it ends every hold of its member, as a `lost` would;
- A's poll that carries the revoke itself, or overlaps a2 or r: its fetch may lie on either
  side;
- Jepsen's histories, and any history without `rebalance` events: not judged (a note when
  consumers subscribed).

`committed-offset-regressed`. Within the run's group, for a key k: two ops X and Y whose
commits of k succeeded, X completed before Y was invoked, and Y's offset is below X's. Kafka
refuses a stale member's commit (KIP-848: the member epoch "is the one used to fence the member
(e.g. offsets commit)", STALE_MEMBER_EPOCH; the classic protocol: ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID, the CommitFailedException "the group has already rebalanced and assigned the
partitions to another member"), and a partition's next owner starts from what the previous one
committed before revoking it (the listener order above). A member commits the position it read
up to, which moves forward: so the group's committed offset of k never goes back. Only commits
of processes that subscribed count (assign-mode consumers use groups of their own), and only
offsets >= 0 (librdkafka names partitions it stored nothing for with OFFSET_INVALID, -1001). A
partition that lost records can cause this lawfully: a consumer whose committed offset lies
past the log's end (a truncation, an unclean election) is moved back by auto.offset.reset, and
commits lower; the finding says so, and the loss is the anomaly to look at (the queue checks'
lost-write, inconsistent-offsets or unseen of the same key). Concurrent commits (neither
completed before the other was invoked) and equal offsets are not compared.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.scan.op_rows import client_process, row_fields, row_value
from history.format import (
    ASSIGNED,
    COMMIT_FIELD,
    INVOKE,
    OK,
    REBALANCE_EVENTS,
    REBALANCE_FIELD,
    REVOKED,
)

# The op rows the rules read whole: the subscribe ops (who joined the group), and the polls and
# transactions (what each member read, the events and commits they carry).
SUBSCRIBE_FS = ("subscribe",)
GROUP_FS = ("subscribe", "poll", "txn")
# A rebalance event that cannot be read (a Parquet history not written by history/reader.py,
# which refuses them): it ends every hold of its member with an unknown end.
MALFORMED = "malformed"

OWNER_RULE = (
    "an orderly handover revokes a partition from its previous owner before the coordinator "
    'assigns it to the next (KIP-848: "new partitions are incrementally assigned to the member '
    'when they are revoked by the other members"; ConsumerRebalanceListener: "the old consumer '
    "will always invoke onPartitionsRevoked for that partition prior to the new consumer "
    'invoking onPartitionsAssigned for the same partition"), so no member whose hold ends in an '
    "orderly revoke polls a partition after another member was assigned it"
)
COMMIT_RULE = (
    "a group's committed offset of a partition never goes back: a stale member's commit is "
    "refused (KIP-848 STALE_MEMBER_EPOCH; classic ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), and "
    "the next owner starts from what the previous one committed before revoking the partition"
)
TRUNCATION = (
    "A partition that lost records can cause this: a consumer whose committed offset lies past "
    "the log's end is moved back by auto.offset.reset and commits lower; then the loss is the "
    "anomaly (see the queue findings of this key)."
)


@dataclass(frozen=True)
class GroupOp:
    """One completed op of a client process, as the group rules read it."""

    index: int  # the completion's
    process: int
    f: str
    type: str
    invoke_time: int
    time: int
    reads: dict[int, list[int]]  # key -> offsets its polls returned, in read order
    events: tuple[tuple[str, tuple[int, ...], int], ...]  # as the listener ran
    commit: dict[int, int]  # key -> offset a successful commit stored (ok polls only)


@dataclass
class GroupsResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: bool = False
    stats: dict[str, int] = field(default_factory=dict)


def group_ops(rows: Iterable[dict[str, Any]]) -> tuple[list[GroupOp], int]:
    """The completed ops of client processes among `rows` (op rows, invocations included), in
    index order, and how many rebalance events or commits were malformed (left out)."""
    invoked = {r["index"]: r["time"] for r in rows if r["type"] == INVOKE}
    out, malformed = [], 0
    for r in rows:
        process = client_process(r["process"])
        if r["type"] == INVOKE or process is None or r.get("time") is None:
            continue
        inv = invoked.get(r.get("invoke_index"))
        if inv is None:
            continue
        fields = row_fields(r)
        events, bad_events = _events(fields.get(REBALANCE_FIELD))
        commit, bad_commit = _commit(fields.get(COMMIT_FIELD)) if r["type"] == OK else ({}, 0)
        malformed += bad_events + bad_commit
        out.append(
            GroupOp(
                r["index"],
                process,
                str(r["f"]),
                str(r["type"]),
                int(inv),
                int(r["time"]),
                _reads(row_value(r)),
                events,
                commit,
            )
        )
    out.sort(key=lambda o: o.index)
    return out, malformed


def _key(k: Any) -> int | None:
    if isinstance(k, bool):
        return None
    if isinstance(k, int):
        return k
    if isinstance(k, str):
        try:
            return int(k)
        except ValueError:
            return None
    return None


def _events(raw: Any) -> tuple[tuple[tuple[str, tuple[int, ...], int], ...], int]:
    if raw is None:
        return (), 0
    if not isinstance(raw, list):
        return (), 1
    out, bad = [], 0
    for ev in raw:
        kind, keys, t = ev if isinstance(ev, list) and len(ev) == 3 else (None, None, None)
        ints = [_key(k) for k in keys] if isinstance(keys, list) else [None]
        if (
            kind not in REBALANCE_EVENTS
            or any(k is None for k in ints)
            or not isinstance(t, int)
            or isinstance(t, bool)
        ):
            # Its partitions are unknown: it ends every hold of its member (`windows`), as a
            # lost event dropped here would have.
            bad += 1
            out.append((MALFORMED, (), 0))
            continue
        out.append((str(kind), tuple(k for k in ints if k is not None), t))
    return tuple(out), bad


def _commit(raw: Any) -> tuple[dict[int, int], int]:
    if raw is None:
        return {}, 0
    if not isinstance(raw, dict):
        return {}, 1
    out, bad = {}, 0
    for k, offset in raw.items():
        key = _key(k)
        if key is None or not isinstance(offset, int) or isinstance(offset, bool):
            bad += 1
        elif offset >= 0:  # negative: librdkafka's OFFSET_INVALID, nothing stored
            out[key] = offset
    return out, bad


def _reads(value: Any) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for mop in value if isinstance(value, list) else ():
        if not (isinstance(mop, list) and len(mop) == 2 and mop[0] == "poll"):
            continue
        if not isinstance(mop[1], dict):
            continue
        for k, pairs in mop[1].items():
            key = _key(k)
            if key is None or not isinstance(pairs, list):
                continue
            offsets = [p[0] for p in pairs if isinstance(p, list) and p and isinstance(p[0], int)]
            if pairs:
                out.setdefault(key, []).extend(offsets)
                if not offsets:
                    out[key].append(-1)  # records returned, offsets unknown
    return out


# -- windows --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """A member's hold of a partition: from `start` (its assigned event, in op `start_op`) to
    `end` (`revoked`, `lost`, or None: not known), in op `end_op`."""

    process: int
    key: int
    start: int
    start_op: int
    end_kind: str | None
    end: int | None
    end_op: int | None


@dataclass(frozen=True)
class Assign:
    process: int
    key: int
    time: int
    op: int


def windows(ops: list[GroupOp]) -> tuple[list[Window], list[Assign], int]:
    """Every member's windows, every trusted `assigned` event, and how many events lay outside
    their op's span (each ends its member's window as an unknown end would)."""
    open_: dict[tuple[int, int], tuple[int, int]] = {}
    out: list[Window] = []
    assigns: list[Assign] = []
    untrusted = 0
    for op in ops:
        for kind, keys, t in op.events:
            if kind == MALFORMED:
                keys = tuple(k for (p, k) in open_ if p == op.process)
            trusted = kind != MALFORMED and op.invoke_time <= t <= op.time
            untrusted += not trusted and kind != MALFORMED
            for k in keys:
                held = open_.get((op.process, k))
                if kind == ASSIGNED and trusted:
                    assigns.append(Assign(op.process, k, t, op.index))
                    if held is None:
                        open_[op.process, k] = (t, op.index)
                    continue
                if held is None:
                    continue  # nothing to end (an untrusted assigned opens nothing)
                del open_[op.process, k]
                end_kind = kind if trusted and kind != ASSIGNED else None
                out.append(Window(op.process, k, held[0], held[1], end_kind, t, op.index))
    for (process, k), (start, start_op) in open_.items():
        out.append(Window(process, k, start, start_op, None, None, None))
    return out, assigns, untrusted


@dataclass(frozen=True)
class PollOf:
    op: GroupOp
    offsets: list[int]


def double_owners(ops: list[GroupOp]) -> tuple[list[Finding], int, int, int]:
    """(findings, handovers judged, overlaps without a poll, untrusted events)."""
    wins, assigns, untrusted = windows(ops)
    by_key: dict[int, list[Assign]] = defaultdict(list)
    for a in assigns:
        by_key[a.key].append(a)
    polls: dict[tuple[int, int], list[PollOf]] = defaultdict(list)
    for op in ops:
        for k, offsets in op.reads.items():
            polls[op.process, k].append(PollOf(op, offsets))
    found, judged, quiet = [], 0, 0
    for w in wins:
        if w.end_kind != REVOKED or w.end is None:
            continue
        firsts: dict[int, Assign] = {}
        for a in by_key.get(w.key, ()):
            if a.process != w.process and w.start < a.time < w.end:
                firsts.setdefault(a.process, a)
        for b in sorted(firsts.values(), key=lambda a: (a.time, a.op)):
            judged += 1
            assert w.end is not None
            during = [
                p
                for p in polls.get((w.process, w.key), ())
                if p.op.invoke_time > b.time and p.op.time < w.end and p.op.index != w.end_op
            ]
            if during:
                found.append(double_owner(w, b, during))
            else:
                quiet += 1
    return found, judged, quiet, untrusted


def _offsets(offsets: Iterable[int]) -> str:
    known = sorted(o for o in offsets if o >= 0)
    if not known:
        return "records (offsets unknown)"
    return f"offset {known[0]}" if known[0] == known[-1] else f"offsets {known[0]}..{known[-1]}"


def double_owner(w: Window, b: Assign, during: list[PollOf]) -> Finding:
    k, a = w.key, w.process
    polls = "; ".join(
        f"{_offsets(p.offsets)} in op {p.op.index} (invoked {secs(p.op.invoke_time)}, "
        f"completed {secs(p.op.time)})"
        for p in during
    )
    every = [o for p in during for o in p.offsets]
    return Finding(
        "group-double-owner",
        k,
        tuple(sorted({b.op, w.end_op or b.op, *(p.op.index for p in during)})),
        f"key {k} (partition {k}) was assigned to process {b.process} at {secs(b.time)} (op "
        f"{b.op}), while process {a}, which had held it since {secs(w.start)} (op "
        f"{w.start_op}) and revoked it only at {secs(w.end)} (op {w.end_op}), in an orderly "
        f"rebalance, polled {_offsets(every)} of it after that assignment: {polls}. Two members "
        "of the group consumed the partition at once, and the previous owner's revoke, which an "
        f"orderly handover puts before the new owner's assignment, came after it. Rule: "
        f"{OWNER_RULE}",
        {
            "partition": k,
            "owner": a,
            "new_owner": b.process,
            "assigned_at": b.time,
            "assign_op": b.op,
            "held_since": w.start,
            "revoked_at": w.end,
            "revoke_op": w.end_op,
            "polls": [
                {
                    "op": p.op.index,
                    "offsets": p.offsets,
                    "invoked": p.op.invoke_time,
                    "completed": p.op.time,
                }
                for p in during
            ],
            "rule": OWNER_RULE,
        },
    )


# -- commits --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    op: GroupOp
    offset: int


def regressed_commits(ops: list[GroupOp], members: set[int]) -> tuple[list[Finding], int]:
    """(findings, commits judged): commits of `members` (processes that subscribed)."""
    by_key: dict[int, list[Commit]] = defaultdict(list)
    for op in ops:
        if op.process in members:
            for k, offset in op.commit.items():
                by_key[k].append(Commit(op, offset))
    found, judged = [], 0
    for k in sorted(by_key):
        commits = sorted(by_key[k], key=lambda c: (c.op.time, c.op.index))
        judged += len(commits)
        done = [c.op.time for c in commits]
        # best[i]: the commit with the highest offset among commits[: i + 1] (earliest on ties).
        best, top = [], None
        for c in commits:
            if top is None or c.offset > top.offset:
                top = c
            best.append(top)
        below: dict[int, tuple[Commit, list[Commit]]] = {}
        for y in sorted(commits, key=lambda c: (c.op.invoke_time, c.op.index)):
            n = bisect.bisect_left(done, y.op.invoke_time)  # completed strictly before
            if n == 0:
                continue
            x = best[n - 1]
            if y.offset < x.offset:
                below.setdefault(x.op.index, (x, []))[1].append(y)
        for x, ys in below.values():
            found.append(committed_offset_regressed(k, x, ys))
    return found, judged


def committed_offset_regressed(k: int, x: Commit, ys: list[Commit]) -> Finding:
    head = ys[:8]
    later = "; ".join(
        f"op {y.op.index} (process {y.op.process}, invoked {secs(y.op.invoke_time)}, "
        f"acknowledged {secs(y.op.time)}) committed offset {y.offset}"
        for y in head
    )
    more = f" (and {len(ys) - len(head)} more)" if len(ys) > len(head) else ""
    return Finding(
        "committed-offset-regressed",
        k,
        tuple(sorted({x.op.index, *(y.op.index for y in head)})),
        f"the group's committed offset of key {k} (partition {k}) went back: op {x.op.index} "
        f"(process {x.op.process}) committed offset {x.offset}, acknowledged at "
        f"{secs(x.op.time)}; after that, {later}{more}. {TRUNCATION} Rule: {COMMIT_RULE}",
        {
            "partition": k,
            "offset": x.offset,
            "committed_by": x.op.index,
            "committed_at": x.op.time,
            "later": [
                {"op": y.op.index, "offset": y.offset, "invoked": y.op.invoke_time} for y in ys
            ],
            "rule": COMMIT_RULE,
        },
    )


# -- the family -----------------------------------------------------------------------------


def subscribers(rows: Iterable[dict[str, Any]]) -> set[int]:
    """Client processes whose `subscribe` may have taken effect (ok or info): the members of
    the run's group."""
    out = set()
    for r in rows:
        process = client_process(r["process"])
        if r["f"] == "subscribe" and r["type"] in (OK, "info") and process is not None:
            out.add(process)
    return out


def check_groups(rows: Iterable[dict[str, Any]]) -> GroupsResult:
    """Both rules over op rows with f in GROUP_FS (only the subscribe ops when the history
    carries no op fields: then only whether a note is owed), read twice: a list, or an
    op_stream.OpRows."""
    members = subscribers(rows)
    ops, malformed = group_ops(rows)
    n_events = sum(len(op.events) for op in ops)
    n_commits = sum(len(op.commit) for op in ops if op.process in members)
    out = GroupsResult()
    if members and not n_events:
        out.notes.append(
            f"consumer groups: {len(members)} consumer(s) subscribed, but no op records "
            "rebalance events (its clients did not record them: Jepsen's, or kchaos's before "
            "the field existed): partition ownership (group-double-owner) not judged"
        )
    if not n_events and not n_commits:
        return out
    owners, judged, quiet, untrusted = double_owners(ops)
    commits, n_judged = regressed_commits(ops, members)
    out.findings = owners + commits
    out.checked = True
    out.stats = {
        "group_rebalance_events": n_events,
        "group_handovers_judged": judged,
        "group_commits_judged": n_judged,
    }
    out.notes.append(
        f"consumer groups: {n_events} rebalance event(s) of {len(members)} subscriber(s); "
        f"{judged} handover(s) judged for a second owner's polls, {n_judged} commit(s) for "
        "order"
    )
    if quiet:
        out.notes.append(
            f"consumer groups: {quiet} handover(s) in which the previous owner's orderly revoke "
            "was recorded after the next owner's assignment, with no poll of the partition in "
            "between: no record was consumed twice, so no finding (the rebalance listener's "
            "order alone was broken, or its clocks disagree)"
        )
    if untrusted:
        out.notes.append(
            f"consumer groups: {untrusted} rebalance event(s) timed outside their op's "
            "invocation and completion: ignored, and the member's hold of those partitions "
            "not judged"
        )
    if malformed:
        out.notes.append(
            f"consumer groups: {malformed} malformed rebalance event(s) or commit entr(ies) "
            "left out"
        )
    return out
