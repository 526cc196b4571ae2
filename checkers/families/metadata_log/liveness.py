"""Both sides of KIP-631's broker leases, over a stored run: a broker that cannot renew its lease
is fenced in time (`dead-broker-not-fenced`), and a broker that can is not (`spurious-fence`).

lease.py checks what a fenced broker must not do; this module checks when the fence is owed.

The evidence: the committed metadata log (fences, registrations, and the records every active
controller writes, NoOpRecords every 500 ms on 3.3+, which show a living leader and when), the
nemesis ops (checkers/scan/fault_windows.py: which node was down, stopped or cut off, and when),
observer samples (the broker's own BrokerState), and the controllers' logs (their fencing
attempts, committed or not: a note). Everything is compared in wall-clock time: the controllers
stamp records with their wall clock, and the harness stamps ops with the same Docker host's.

What the controller does (Kafka 3.9 BrokerHeartbeatManager and QuorumController): every
heartbeat moves the broker's last contact to now; a deferred event on the controller's queue
fences the first broker whose last contact is older than broker.session.timeout.ms
("Fencing broker B because its session has timed out", ReplicationControlManager
maybeFenceOneStaleBroker), one at a time. A controller that becomes active registers every
broker in its heartbeat manager as just contacted: a new active controller grants every broker a
fresh lease. A broker that asks to shut down is fenced by a heartbeat too, after a
BrokerRegistrationChangeRecord with inControlledShutdown (ReplicationControlManager
handleBrokerInControlledShutdown): not a lease expiry.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.core.findings import Finding
from checkers.families.metadata_log.parse import MetadataLog, Record
from checkers.scan.fault_windows import Faults, FaultSpan, fault_windows, op_spans, utc
from checkers.scan.node_logs import LINE, node_log, wall_of
from history.effects import (
    CONTROLLER,
    CUT,
    DEGRADED,
    DOWN,
    HEAL,
    SKEWED,
    STALLED,
    STOP,
    STOPPED,
    Effect,
)
from history.format import NEMESIS, OBSERVER, PLAN_JSON

DEAD_RULE = (
    'KIP-631: "A broker cannot continue using a lease indefinitely after sending a single '
    "heartbeat. When brokers are rejected by the controller, or otherwise unable to renew "
    "their lease before it expires, they enter the 'fenced' state\""
)
SPURIOUS_RULE = (
    'KIP-631: "When the broker accepts the registration, it grants or renews a broker ID lease '
    'associating the broker process with its ID"; its broker state machine leaves ACTIVE for '
    'FENCED only when the "lease expired or revoked (stale metadata, id conflict, unable to '
    'communicate, etc.)"'
)
# Why a spurious fence alone does not make the run invalid (the run option says otherwise).
SPURIOUS_TOLERATED = (
    "an availability finding, not a safety one: Kafka kept its safety (a fenced broker leads "
    "nothing and its clients are sent elsewhere), but the broker's clients saw it unavailable "
    "while it was healthy; the run option --availability fail (plan.json spec availability) "
    "makes it a failure"
)
AVAILABILITY = ("report", "fail")
# After the session timeout the controller still has to get to the fence: its check is a
# deferred event on the controller's single event queue (behind heartbeats, client requests,
# partition changes), then the fence and the partition changes it brings are appended and
# committed by a majority. A new active controller first has to catch up and activate after its
# LEADER_CHANGE record, which is when it grants its fresh leases. On six real 3.9 runs (fast
# timing, 3 nodes sharing 2 cores) the fence came 1.8-2.9 s after a kill or pause when the
# leader stayed (the last heartbeat came up to 0.5 s before it), and 3.04-3.76 s after a new
# leader's LEADER_CHANGE: at most 0.76 s past the lease. 3 s covers that four times over, for a
# nightly box busier than those runs' (a false alarm is the worst finding), and still lets the
# check fire within a 12 s fault at fast timing, a new leader's election included.
ALLOWANCE_MS = 3000
# An active controller appends a NoOpRecord every 500 ms (metadata.max.idle.interval.ms). A
# longer silence in one epoch's committed records means its leader was stalled (paused, its
# queue blocked, cut off): its clock restarts there, as a new controller's would.
SILENCE_MS = 2000
SHOWN = 20  # notes listed one by one; the rest are counted


@dataclass(frozen=True)
class LoggedFence:
    """A controller's log line: "Fencing broker B [at epoch E] because its session has timed
    out" (ReplicationControlManager; 4.x adds the epoch)."""

    node: str
    file: str  # as cited: logs/<node>/stdout.log
    line: int
    wall: float  # the controller's log clock, Unix seconds
    broker: int

    def cite(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class LivenessInput:
    """What the lease liveness rules read besides the metadata logs.

    `rows`: op rows, every column, of the nemesis, upgrade, migration and observer processes;
    `availability`: the run's plan option (report or fail); `logged`: the controllers' fencing
    lines (`logged_fences`).
    """

    rows: list[dict[str, Any]]
    availability: str = "report"
    logged: list[LoggedFence] = field(default_factory=list)


@dataclass
class LivenessResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


# -- the committed broker states -----------------------------------------------------------

UNFENCED, FENCED, SHUTTING_DOWN, GONE = "unfenced", "fenced", "controlled shutdown", "gone"


def transition(r: Record) -> tuple[int, str] | None:
    """The broker a record moves, and the state it moves it to."""
    if r.control:
        return None
    d, t = r.data, r.type
    broker = d.get("brokerId", d.get("id"))
    if not isinstance(broker, int):
        return None
    if t == "REGISTER_BROKER_RECORD":
        if d.get("inControlledShutdown") is True:
            return broker, SHUTTING_DOWN
        return broker, UNFENCED if d.get("fenced") is False else FENCED
    if t == "UNREGISTER_BROKER_RECORD":
        return broker, GONE
    if t == "FENCE_BROKER_RECORD":
        return broker, FENCED
    if t == "UNFENCE_BROKER_RECORD":
        return broker, UNFENCED
    if t == "BROKER_REGISTRATION_CHANGE_RECORD":
        if d.get("fenced") == 1:
            return broker, FENCED
        if d.get("inControlledShutdown") == 1:
            return broker, SHUTTING_DOWN
        if d.get("fenced") == -1:
            return broker, UNFENCED
    return None


def is_fence(r: Record) -> int | None:
    """The broker a FENCE_BROKER_RECORD or a BrokerRegistrationChangeRecord fenced=1 fences."""
    if r.control or r.type not in ("FENCE_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD"):
        return None
    moved = transition(r)
    return moved[0] if moved is not None and moved[1] == FENCED else None


@dataclass(frozen=True)
class BrokerStates:
    """Each broker's committed transitions, in offset order."""

    moves: dict[int, list[tuple[Record, str]]]

    @classmethod
    def of(cls, committed: list[Record]) -> BrokerStates:
        moves: dict[int, list[tuple[Record, str]]] = {}
        for r in committed:
            if (m := transition(r)) is not None:
                moves.setdefault(m[0], []).append((r, m[1]))
        return cls(moves)

    def at(self, broker: int, wall: float) -> tuple[str | None, Record | None]:
        """The broker's state after every committed record stamped at or before `wall`
        (None: no record says, e.g. it registered before the log's first offset)."""
        state: tuple[str | None, Record | None] = (None, None)
        for r, s in self.moves.get(broker, []):
            if r.create_ms / 1000 <= wall:
                state = (s, r)
        return state

    def changes(self, broker: int, after: float, until: float) -> list[tuple[Record, str]]:
        return [
            (r, s) for r, s in self.moves.get(broker, []) if after < r.create_ms / 1000 <= until
        ]


# -- epochs: who led, and when a living leader is shown ------------------------------------


@dataclass(frozen=True)
class LeaderRun:
    """Committed records of one epoch without a silence longer than SILENCE_MS: its leader was
    active and appending from `first` to `last`."""

    epoch: int
    first: Record
    last: Record
    resumed: bool  # an earlier run of the same epoch ended in a silence

    @property
    def start(self) -> float:
        return self.first.create_ms / 1000

    @property
    def end(self) -> float:
        return self.last.create_ms / 1000


def leader_runs(committed: list[Record]) -> list[LeaderRun]:
    out: list[LeaderRun] = []
    run: list[Record] = []

    def close() -> None:
        if run:
            resumed = bool(out) and out[-1].epoch == run[0].epoch
            last = max(run, key=lambda r: r.create_ms)
            out.append(LeaderRun(run[0].epoch, run[0], last, resumed))

    for r in committed:
        if r.epoch < 0:
            continue
        if run and (r.epoch != run[-1].epoch or r.create_ms - run[-1].create_ms > SILENCE_MS):
            close()
            run = []
        run.append(r)
    close()
    return out


def epoch_leaders(committed: list[Record], samples: list[Sample]) -> dict[int, int]:
    """Epoch -> its leader's node id, where the LEADER_CHANGE record (printed with its fields
    from Kafka 4.1 on) or the controllers' own samples (raft leader and epoch) say, and agree."""
    said: dict[int, set[int]] = {}
    for r in committed:
        if r.control and r.text.startswith("LeaderChange:"):
            try:
                leader = json.loads(r.text[len("LeaderChange:") :]).get("leaderId")
            except ValueError:
                continue
            if isinstance(leader, int):
                said.setdefault(r.epoch, set()).add(leader)
    for s in samples:
        raft = s.value.get("raft")
        if isinstance(raft, dict):
            leader, epoch = raft.get("leader"), raft.get("epoch")
            if isinstance(leader, int) and leader >= 0 and isinstance(epoch, int):
                said.setdefault(epoch, set()).add(leader)
    return {e: next(iter(ls)) for e, ls in said.items() if len(ls) == 1}


# -- observer samples, in wall time ----------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    index: int
    node: str
    start: float  # invocation wall
    end: float  # completion wall
    type: str  # ok, fail, info
    value: dict[str, Any]

    def cite(self) -> str:
        state = self.value.get("broker_state") if self.type == "ok" else self.type
        return f"op {self.index} ({self.node} at {utc(self.end)}: {state})"


def samples_of(rows: list[dict[str, Any]]) -> list[Sample] | None:
    """Every observe op, answered or not; None when the observer's ops have no wall clock."""
    spans = op_spans(rows, (OBSERVER,))
    if spans is None:
        return None
    node = {r["index"]: r.get("node") for r in rows if r["process"] == OBSERVER}
    out = []
    for s in spans:
        name = node.get(s.invoke_index)
        if s.f != "observe" or not name:
            continue
        value = s.value if isinstance(s.value, dict) and s.type == "ok" else {}
        out.append(Sample(s.index, str(name), s.start, s.end, s.type, value))
    return out


# -- the run's cluster -----------------------------------------------------------------------


@dataclass(frozen=True)
class Nodes:
    ids: dict[str, int]  # name -> node id
    brokers: frozenset[str]
    controllers: frozenset[str]

    @classmethod
    def of(cls, cluster: dict[str, Any]) -> Nodes:
        nodes = [n for n in cluster.get("nodes") or [] if "name" in n]
        ids = {n["name"]: n["node_id"] for n in nodes if isinstance(n.get("node_id"), int)}
        role = {n["name"]: set(n.get("roles") or []) for n in nodes}
        return cls(
            ids,
            frozenset(n for n, r in role.items() if "broker" in r),
            frozenset(n for n, r in role.items() if "controller" in r),
        )

    def name(self, node_id: int) -> str | None:
        return next((n for n, i in self.ids.items() if i == node_id), None)


# -- dead-broker-not-fenced ----------------------------------------------------------------


@dataclass(frozen=True)
class Obligation:
    node: str
    broker: int
    fault: FaultSpan
    since: float  # the fault held from here ...
    until: float  # ... to here (the invocation of what may have undone it)
    how: str  # killed, paused, cut off from every controller
    effect: str  # the effect it is owed for: DOWN, STOPPED or CUT


# What a node certainly down or stopped is called in a finding (with the effect's `by`).
HOW = {DOWN: "killed", STOPPED: "paused"}


def _cut_off(e: Effect, node: str, nodes: Nodes) -> bool:
    others = nodes.controllers - {node}
    return bool(others) and all(frozenset((node, c)) in (e.links or ()) for c in others)


def _owed(e: Effect, node: str, nodes: Nodes) -> str | None:
    """How `node` was certainly kept from heartbeating by `e`, in words; None: not certainly.
    Only a JVM seen gone or stopped, or links cut to every other controller, oblige a fence."""
    if e.effect in HOW and node in (e.done or ()):
        return HOW[e.effect] + (f" ({e.by})" if e.by else "")
    if e.effect == CUT and _cut_off(e, node, nodes):
        return "cut off from every other controller by a partition"
    return None


def obligations(faults: Faults, nodes: Nodes) -> list[Obligation]:
    """Broker nodes certainly killed, paused, or cut off from every other controller, and when."""
    out = []
    for span in faults.spans:
        held = span.held
        if held is None:
            continue
        for node in sorted(nodes.brokers):
            if node not in nodes.ids:
                continue
            owed = next(((e, h) for e in span.effects if (h := _owed(e, node, nodes))), None)
            if owed is None:
                continue
            e, how = owed
            out.append(Obligation(node, nodes.ids[node], span, held[0], held[1], how, e.effect))
    return out


# A controller down, stopped or cut off shows in the committed records themselves (a silence, a
# new epoch), which the leader runs account for; any other effect on a controller may delay
# its fence or shift its clock unseen.
SEEN_IN_RECORDS = frozenset({DOWN, STOPPED, CUT})


def _interferes(faults: Faults, nodes: Nodes, lo: float, hi: float) -> str | None:
    """What may have delayed the active controller's fence or shifted its clock: a packet,
    clock or JVM fault on a controller (or on nodes unknown), an effect this module does not
    know (wherever it was), an upgrade or migration step."""
    for span in faults.spans:
        a, b = span.outer
        if b < lo or a > hi:
            continue
        for e in span.effects:
            if e.effect in SEEN_IN_RECORDS:
                continue
            if not e.known or e.nodes is None or e.nodes & nodes.controllers:
                return span.says()
    for op, _ in faults.others:
        ends_a_fault = op.process == NEMESIS and (op.f == HEAL or op.f.startswith(STOP))
        if op.overlaps(lo, hi) and not ends_a_fault:
            return f"{op.process} op {op.cite()}"
    return None


def dead_brokers(
    ob: list[Obligation],
    faults: Faults,
    nodes: Nodes,
    committed: list[Record],
    leaders: dict[int, int],
    timeout_ms: int,
) -> tuple[list[Finding], int, int, list[str]]:
    """Findings, obligations judged, obligations met, and what was left unjudged and why."""
    states = BrokerStates.of(committed)
    runs = leader_runs(committed)
    owed = (timeout_ms + ALLOWANCE_MS) / 1000
    out: list[Finding] = []
    unjudged: list[str] = []
    judged = met = 0
    for o in ob:
        state, since_record = states.at(o.broker, o.since)
        if state != UNFENCED:
            continue
        best: tuple[float, LeaderRun] | None = None
        for run in runs:
            if run.end < o.since or run.start > o.until:
                continue
            leader = leaders.get(run.epoch)
            if leader == o.broker and o.node in nodes.controllers:
                continue  # its own node led: a cut-off leader fences nobody it cannot reach
            if o.effect == CUT and o.node in nodes.controllers and leader is None:
                continue  # an epoch its own cut-off node may have led
            deadline = max(o.since, run.start) + owed
            if deadline <= o.until and run.end >= deadline and (best is None or deadline < best[0]):
                best = (deadline, run)
        if best is None:
            continue
        deadline, run = best
        why = _interferes(faults, nodes, o.since, deadline)
        if why is not None:
            unjudged.append(f"broker {o.broker} {o.how} from {utc(o.since)} ({why} overlaps)")
            continue
        judged += 1
        moved = states.changes(o.broker, o.since, deadline)
        if moved:
            met += 1
            continue
        out.append(_dead_finding(o, run, deadline, since_record, states, timeout_ms))
    return out, judged, met, unjudged


def _dead_finding(
    o: Obligation,
    run: LeaderRun,
    deadline: float,
    unfenced: Record | None,
    states: BrokerStates,
    timeout_ms: int,
) -> Finding:
    start, end = o.fault.start, o.fault.undone_by
    later = states.changes(o.broker, deadline, math.inf)
    fenced = (
        f"the first committed record to change it after that is {later[0][0].cite()} "
        f"({later[0][0].create_ms / 1000 - o.since:.3f} s after the fault began)"
        if later
        else "no committed record changes it after that"
    )
    if run.start <= o.since:
        fresh = f"epoch {run.epoch} was led from {utc(run.start)} ({run.first.cite()})"
    elif run.resumed:
        fresh = (
            f"epoch {run.epoch}'s leader appended again at {utc(run.start)} ({run.first.cite()}) "
            f"after more than {SILENCE_MS / 1000:g} s of silence, so the clock starts there"
        )
    else:
        fresh = (
            f"epoch {run.epoch} began at {utc(run.start)} with {run.first.cite()}, and a new "
            "active controller grants every broker a fresh lease, so the clock starts there"
        )
    ended = f"until {end.cite()} was invoked" if end is not None else "until the history ended"
    ops = tuple(i for op in (start, end) if op is not None for i in (op.invoke_index, op.index))
    records = [run.first.cite(), run.last.cite()] + ([unfenced.cite()] if unfenced else [])
    return Finding(
        "dead-broker-not-fenced",
        None,
        ops,
        f"broker {o.broker} (node {o.node}) was {o.how} by {start.cite()} from {utc(o.since)}, "
        f"{ended} at {utc(o.until)}; it was unfenced in the committed log then"
        + (f" ({unfenced.cite()})" if unfenced else "")
        + f". A living controller other than {o.node} led: {fresh}, and its committed records "
        f"run to {utc(run.end)} ({run.last.cite()}). Its lease ran out by {utc(deadline)} (the "
        f"{timeout_ms / 1000:g} s session timeout + a {ALLOWANCE_MS / 1000:g} s allowance for "
        f"the controller's periodic stale-broker check after {utc(max(o.since, run.start))}), "
        f"yet no committed record fenced or unregistered broker {o.broker} by then; {fenced}. "
        f"Rule: {DEAD_RULE}",
        {
            "rule": DEAD_RULE,
            "records": records,
            "broker": o.broker,
            "node": o.node,
            "deadline": round(deadline, 3),
            "allowance_s": ALLOWANCE_MS / 1000,
        },
    )


# -- spurious-fence --------------------------------------------------------------------------


def _controller_stall(span: FaultSpan) -> bool:
    """A stall of the controller's code alone (its event queue): the broker on the same combined
    node goes on heartbeating, so it excuses no fence of it."""
    return any(e.effect == STALLED and e.side == CONTROLLER for e in span.effects)


def _excuses(e: Effect, node: str, controllers: frozenset[str]) -> bool:
    if e.effect == CUT:
        return e.links is None or any(frozenset((node, c)) in e.links for c in controllers)
    if e.effect in (DEGRADED, SKEWED) or not e.known:
        # Its links, or a controller's: a skewed controller stamps the fence. An effect not
        # known here is taken to disrupt every node it names, and so their links.
        return e.nodes is None or node in e.nodes or bool(e.nodes & controllers)
    if e.effect == STALLED and e.side == CONTROLLER:
        return False
    return e.on(node)


def _excuse(faults: Faults, nodes: Nodes, node: str, lo: float, hi: float) -> str | None:
    """A fault or step that may have kept `node` from heartbeating within [lo, hi]: one on the
    node itself, links cut between it and a controller, links degraded or a clock skewed on it
    or on a controller (its links; a controller's skewed clock stamps the fence), an effect not
    known here on it or a controller, any heal, upgrade or migration step, or an op naming no
    node. A stall of a controller's code alone does not excuse: a healthy broker's lease
    outlives a stalled controller queue, on a combined node too (its broker heartbeats from
    threads of its own)."""
    for span in faults.spans:
        a, b = span.outer
        if b < lo or a > hi:
            continue
        if any(_excuses(e, node, nodes.controllers) for e in span.effects):
            return span.says()
    for op, named_nodes in faults.others:
        if op.overlaps(lo, hi) and (named_nodes is None or node in named_nodes):
            return f"{op.process} op {op.cite()}"
    return None


def _controlled_shutdown(states: BrokerStates, broker: int, fence: Record) -> bool:
    """A BrokerRegistrationChangeRecord put the broker in controlled shutdown since it last
    registered or was unfenced: this fence is the shutdown's end, not a lease expiry."""
    shutting = False
    for r, s in states.moves.get(broker, []):
        if r.offset >= fence.offset:
            break
        if s == SHUTTING_DOWN:
            shutting = True
        elif s in (UNFENCED, GONE) or r.type == "REGISTER_BROKER_RECORD":
            shutting = False
    return shutting


def _registration(states: BrokerStates, broker: int, fence: Record) -> Record | None:
    regs = [
        r
        for r, _ in states.moves.get(broker, [])
        if r.type == "REGISTER_BROKER_RECORD" and r.offset < fence.offset
    ]
    return regs[-1] if regs else None


def spurious_fences(
    committed: list[Record],
    faults: Faults,
    nodes: Nodes,
    samples: list[Sample],
    timeout_ms: int,
    history_end: float,
    availability: str,
) -> tuple[list[Finding], int]:
    """Findings, and the committed fences judged (not a controlled shutdown, within the
    history)."""
    states = BrokerStates.of(committed)
    window = (timeout_ms + ALLOWANCE_MS) / 1000
    out = []
    judged = 0
    for r in committed:
        broker = is_fence(r)
        if broker is None:
            continue
        f = r.create_ms / 1000
        node = nodes.name(broker)
        if node is None or f > history_end or _controlled_shutdown(states, broker, r):
            continue
        judged += 1
        lo = f - window
        if _excuse(faults, nodes, node, lo, f) is not None:
            continue
        seen = [s for s in samples if s.node == node and s.start <= f and s.end >= lo]
        ok = [s for s in seen if s.type == "ok"]
        if not ok or len(ok) < len(seen):
            continue  # no sample says it was healthy, or one did not answer
        if any(s.value.get("broker_state") != "RUNNING" for s in ok):
            continue
        reg = _registration(states, broker, r)
        started = {s.value.get("started_ms") for s in ok}
        restarted = reg is not None and any(
            isinstance(t, int) and t > reg.create_ms for t in started
        )
        if restarted or len(started) > 1:
            continue  # the JVM answering is not the one whose registration was fenced
        stalls = [
            span
            for span in faults.spans
            if _controller_stall(span) and span.outer[0] <= f and span.outer[1] >= lo
        ]
        out.append(
            _spurious_finding(r, broker, node, ok, lo, reg, timeout_ms, availability, stalls)
        )
    return out, judged


def _spurious_finding(
    fence: Record,
    broker: int,
    node: str,
    ok: list[Sample],
    lo: float,
    reg: Record | None,
    timeout_ms: int,
    availability: str,
    stalls: list[FaultSpan],
) -> Finding:
    f = fence.create_ms / 1000
    # Said outright, so nobody reads "no fault" as "nothing happened to the controllers".
    stalled = "".join(
        f"; a {span.kind or 'stall'} of {', '.join(sorted(span.nodes or ())) or 'a controller'} "
        f"({span.start.cite()}) held a controller's event queue then, which does not stop a "
        "broker's heartbeats (they are sent from the broker's own threads)"
        for span in stalls
    )
    shown = ", ".join(s.cite() for s in ok[:5]) + (f" and {len(ok) - 5} more" if ok[5:] else "")
    records = [fence.cite()] + ([reg.cite()] if reg else [])
    return Finding(
        "spurious-fence",
        None,
        tuple(sorted({s.index for s in ok[:10]} | {span.start.index for span in stalls})),
        f"broker {broker} (node {node}) was fenced by a committed record at {utc(f)} "
        f"({fence.cite()}), yet in the {timeout_ms / 1000:g} s session timeout + "
        f"{ALLOWANCE_MS / 1000:g} s before it ({utc(lo)}-{utc(f)}) no fault, heal, upgrade or "
        f"migration step touched the broker on {node} or its links to the controllers, and every "
        "observer "
        f"sample of {node} there answered broker_state RUNNING ({shown}), from the JVM that "
        "registered the fenced epoch"
        + (f" ({reg.cite()})" if reg else "")
        + stalled
        + "; no controlled shutdown preceded the fence. "
        f"Rule: {SPURIOUS_RULE}",
        {"rule": SPURIOUS_RULE, "records": records, "broker": broker, "node": node},
        tolerated=None if availability == "fail" else SPURIOUS_TOLERATED,
    )


# -- uncommitted fencing attempts (notes) ----------------------------------------------------

_FENCING = re.compile(r"Fencing broker (\d+)(?: at epoch -?\d+)? because its session has timed out")
# A log line is the same fence as a committed record of the same broker stamped just after it:
# the line is logged as the record is generated, on the same controller's clock.
_SAME_FENCE_S = (-0.1, 1.0)


def logged_fences(run_dir: str | Path, nodes: Iterable[str]) -> list[LoggedFence]:
    """The "Fencing broker" lines of `logs/<node>/stdout.log` of each node that has one."""
    out = []
    for node in sorted(nodes):
        path, cited = node_log(run_dir, node)
        try:
            with path.open(encoding="utf-8", errors="replace") as lines:
                for lineno, line in enumerate(lines, start=1):
                    if "Fencing broker" not in line:
                        continue
                    stamp, m = LINE.match(line), _FENCING.search(line)
                    if stamp is None or m is None:
                        continue
                    out.append(LoggedFence(node, cited, lineno, wall_of(stamp[1]), int(m[1])))
        except OSError:
            continue
    return out


def attempt_notes(
    logs: dict[str, MetadataLog],
    committed: list[Record],
    logged: list[LoggedFence],
) -> list[str]:
    """Fence records some controller wrote that the committed log does not hold, and the
    controllers' logged fencings, each saying whether it was committed."""
    by_offset = {r.offset: r for r in committed}
    last = max(by_offset, default=-1)
    notes = []
    seen: set[tuple[int, int, int, str]] = set()
    for _, log in sorted(logs.items()):
        for r in log.records.values():
            broker = is_fence(r)
            key = (r.offset, r.epoch, r.create_ms, r.text)
            if broker is None or key in seen:
                continue
            seen.add(key)
            held = by_offset.get(r.offset)
            if held is not None and held.same_entry(r):
                continue
            fate = (
                f"the committed log holds {held.type} there ({held.cite()})"
                if held is not None
                else f"beyond the highest offset proven committed ({last}): not known committed"
            )
            notes.append(
                f"lease: {log.node} wrote a fence of broker {broker} at "
                f"{utc(r.create_ms / 1000)} ({r.cite()}) that was never committed: {fate}"
            )
    fences = [(r, b) for r in committed if (b := is_fence(r)) is not None]
    attempts = []
    for line in logged:
        match = next(
            (
                r
                for r, b in fences
                if b == line.broker
                and _SAME_FENCE_S[0] <= r.create_ms / 1000 - line.wall <= _SAME_FENCE_S[1]
            ),
            None,
        )
        fate = f"committed ({match.cite()})" if match else "not in the committed log"
        attempts.append(
            f"{line.node} at {utc(line.wall)} fenced broker {line.broker} for a session timeout "
            f"({line.cite()}): {fate}"
        )
        if match is None:
            notes.append(f"lease: an uncommitted fencing attempt: {attempts[-1]}")
    if attempts:
        n_committed = sum(" committed (" in a for a in attempts)
        shown = "; ".join(attempts[:SHOWN]) + (" …" if attempts[SHOWN:] else "")
        notes.append(
            f"lease: controllers logged {len(attempts)} session-timeout fencing(s), "
            f"{n_committed} committed: {shown}"
        )
    if len(notes) > SHOWN:
        notes = [*notes[:SHOWN], f"lease: … and {len(notes) - SHOWN} more such notes"]
    return notes


# -- the whole check -------------------------------------------------------------------------


def read_availability(run_dir: str | Path) -> str:
    """plan.json's spec `availability` (report unless it says fail)."""
    try:
        plan = json.loads((Path(run_dir) / PLAN_JSON).read_text())
    except (OSError, ValueError):
        return "report"
    spec = plan.get("spec") if isinstance(plan, dict) else None
    value = spec.get("availability") if isinstance(spec, dict) else None
    return value if value in AVAILABILITY else "report"


def lease_liveness(
    committed: list[Record],
    logs: dict[str, MetadataLog],
    cluster: dict[str, Any],
    given: LivenessInput,
    timeout_ms: int,
) -> LivenessResult:
    """`committed`: the committed entries in offset order (committed.committed_log); `logs`: the
    voters' decoded logs; `cluster`: cluster.json."""
    result = LivenessResult()
    result.notes += attempt_notes(logs, committed, given.logged)
    nodes = Nodes.of(cluster)
    if not nodes.ids or not nodes.controllers:
        result.notes.append("lease liveness: cluster.json names no node ids or roles: not judged")
        return result
    faults = fault_windows(given.rows, nodes.ids)
    samples = samples_of(given.rows)
    if not faults.walls or samples is None:
        result.notes.append("lease liveness: the history has no wall clock: not judged")
        return result
    if faults.unknown:
        shown = "; ".join(span.says() for span in faults.unknown[:SHOWN])
        result.notes.append(
            f"lease liveness: {len(faults.unknown)} fault(s) with effects this check does not "
            "know, taken as disrupting the nodes they name (every node where they name none) "
            "and their links to the controllers, so they excuse a fence there and leave a "
            f"fence owed while they last unjudged: {shown}"
            + (" …" if faults.unknown[SHOWN:] else "")
        )
    walls = [r["wall"] for r in given.rows if r.get("wall") is not None]
    history_end = max(walls, default=-math.inf)
    leaders = epoch_leaders(committed, samples)
    found, judged, met, unjudged = dead_brokers(
        obligations(faults, nodes), faults, nodes, committed, leaders, timeout_ms
    )
    result.findings += found
    if unjudged:
        result.notes.append(
            f"lease liveness: {len(unjudged)} broker fault(s) long enough to owe a fence not "
            "judged, another fault or step may have delayed the controller: " + "; ".join(unjudged)
        )
    spurious, fences = spurious_fences(
        committed, faults, nodes, samples, timeout_ms, history_end, given.availability
    )
    result.findings += spurious
    result.stats = {
        "lease_obligations": judged,
        "lease_obligations_met": met,
        "lease_fences_judged": fences,
    }
    return result
