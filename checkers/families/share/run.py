"""One share run as the share checks read it: the share ops (history/share.py), the sends that
wrote the share topic, the transactions, the final log read, the faults, and the `share` header
(docs/history.md, "The share workload").

Times are the history's clock (ns). A fault window is where the share-partition leaders and the
share coordinator may have moved or been cut off: a fault's outer span (scan/fault_windows.py:
from its start's invocation to the completion of the stop or heal that ended it) and every other
nemesis, upgrade or migration op, each plus FAULT_TAIL_NS. KafkaShareConsumer's
javadoc: "If the leadership of the partition for a record being delivered changes or the
application's connection to the leader broker is disconnected, the current delivery attempt
ends", and KIP-932: the delivery count "cannot be relied upon to be precise in all situations",
so the checks that order acquisitions by their counts or hold a lock across time leave these
windows out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from checkers.scan.fault_windows import FAULT_PROCESSES as SCAN_FAULT_PROCESSES
from checkers.scan.fault_windows import TIME, fault_windows
from history.errors import HistoryError
from history.format import FAIL, INVOKE, OK
from history.share import (
    ACCEPT,
    OUTCOME_OK,
    REJECT,
    RELEASE,
    SHARE_FIELD,
    SHARE_OFFSETS,
    SHARE_POLL,
    SHARE_VERSION_FIELD,
    Ack,
    Delivery,
    Outcome,
    ShareOps,
    ops_of_rows,
    read_share,
)

# The processes whose ops are faults or steps (scan/fault_windows.py reads them).
FAULT_PROCESSES = SCAN_FAULT_PROCESSES
END_NS = 2**63 - 1
# The other ops a share check reads beside the share ops: the sends (and transactions) that
# wrote the topic, and the final log read (`poll` ops: in a share run only the final reads').
SEND, TXN, POLL = "send", "txn", "poll"
OTHER_FS = (SEND, TXN, POLL)
# How long after a fault's end leadership may still move (a restarted broker rejoining, the
# share coordinator reloading its state): a window's tail.
FAULT_TAIL_NS = 10_000_000_000
# The refusal that says an acknowledgement was not applied (the lock had gone: KIP-932,
# "the attempt to acknowledge it will fail with InvalidRecordStateException"). Other errors
# (timeouts, disconnections, UnknownServerException) leave it unknown whether it was applied.
REFUSED = "InvalidRecordStateException"
# Acknowledgement types that end the sender's acquisition lock (RENEW extends it).
ENDING = (ACCEPT, RELEASE, REJECT)
# share.version (KIP-932's feature; 4.1 has it off unless finalized): the header's level the
# storage was formatted with (`share.share_version`), the feature steps of the upgrade process
# that set it (`features` ops, docs/upgrades.md), and the error a share consumer's poll ends
# with while it is 0: the brokers answer every share group request UNSUPPORTED_VERSION and
# keep no share-partition in memory (4.1.2's KafkaApis and SharePartitionManager), so such a
# poll acquired nothing.
SHARE_VERSION = "share.version"
STEP_PROCESS, FEATURES_F = "upgrade", "features"
REFUSED_OFF = "UnsupportedVersionException"
# The isolation level a run's header may state (`share.isolation_level`, the group's
# `share.isolation.level`); absent: Kafka's default, read_uncommitted.
ISOLATION_FIELD = "isolation_level"
READ_COMMITTED = "read_committed"


@dataclass(frozen=True)
class Sent:
    """An ok send of the share topic: the record at (key, offset) holds `value`."""

    index: int
    value: int
    invoked: int


@dataclass(frozen=True)
class Offsets:
    """One ok `share-offsets` op, with its invocation time."""

    index: int
    process: int | str
    invoked: int
    completed: int
    start: dict[int, int | None]
    lag: dict[int, int | None]


@dataclass
class ShareRun:
    share: ShareOps
    limit: int | None = None  # group.share.delivery.count.limit, from the header
    lock_ms: int | None = None  # group.share.record.lock.duration.ms, from the header
    isolation: str | None = None
    sent: dict[tuple[int, int], Sent] = field(default_factory=dict)
    # Every value some send or transaction invoked, with its first invocation time.
    invoked_at: dict[int, int] = field(default_factory=dict)
    # The outcome of the transaction each transactional value was sent in: (type, op index).
    txn_of: dict[int, tuple[str, int]] = field(default_factory=dict)
    # Each transaction's (invocation, completion) times, by its completion's index.
    txn_times: dict[int, tuple[int, int]] = field(default_factory=dict)
    # The lowest offset of each key the final log read returned.
    log_start: dict[int, int] = field(default_factory=dict)
    faults: list[tuple[int, int]] = field(default_factory=list)
    offsets: list[Offsets] = field(default_factory=list)
    # share-poll ops that did not complete ok: what they acquired is unknown.
    unknown_polls: list[int] = field(default_factory=list)
    # When share groups may have been off (share.version 0: formatted so, or a feature step
    # set it), and the share-poll ops the brokers refused then (REFUSED_OFF): they acquired
    # nothing, so they are not among `unknown_polls`.
    off: list[tuple[int, int]] = field(default_factory=list)
    refused_off_polls: list[int] = field(default_factory=list)
    # Each process's last op completion (its consumer is closed after it).
    last_op: dict[int | str, int] = field(default_factory=dict)
    # Each process's ok share-polls: (completion index, completion time, records handed).
    polls: dict[int | str, list[tuple[int, int, int]]] = field(default_factory=dict)

    def disturbed(self, start: int, end: int) -> bool:
        """Whether a fault window meets [start, end]."""
        return any(s <= end and start <= e for s, e in self.faults)


def read_run(
    rows: Iterable[Mapping[str, Any]], header: Mapping[str, Any], path: str = "history"
) -> ShareRun:
    """The run of op rows (the columnar form's, any order) and the history's header."""
    ops = sorted(ops_of_rows(rows), key=lambda o: o["index"])
    spec = header.get(SHARE_FIELD) or {}
    if not isinstance(spec, dict):
        raise HistoryError(path, None, f"header {SHARE_FIELD} is not an object")
    run = ShareRun(
        read_share(ops, path),
        _int(spec.get("delivery_limit")),
        _int(spec.get("lock_ms")),
        spec.get(ISOLATION_FIELD),
    )
    run.off = off_windows(ops, spec)
    errors = {r["index"]: r.get("error") for r in rows if r["f"] == SHARE_POLL}
    invoked: dict[Any, Mapping[str, Any]] = {}
    for op in ops:
        p = op["process"]
        if op["type"] == INVOKE:
            invoked[p] = op
            if op["f"] in (SEND, TXN):
                for v in _values(op.get("value")):
                    run.invoked_at.setdefault(v, op["time"])
            continue
        inv = invoked.pop(p, None)
        if p in FAULT_PROCESSES:
            continue
        run.last_op[p] = op["time"]
        f = op["f"]
        if f == SEND and op["type"] == OK:
            _sent(run, op, inv)
        elif f == TXN:
            run.txn_times[op["index"]] = (
                inv["time"] if inv is not None else op["time"],
                op["time"],
            )
            if op["type"] == OK:
                _sent(run, op, inv)
            for v in _values((inv or op).get("value")):
                run.txn_of[v] = (op["type"], op["index"])
        elif f == POLL and op["type"] == OK:
            _log_read(run, op)
        elif f == SHARE_POLL and op["type"] != OK:
            began = inv["time"] if inv is not None else op["time"]
            if REFUSED_OFF in str(errors.get(op["index"]) or "") and any(
                s <= op["time"] and began <= e for s, e in run.off
            ):
                run.refused_off_polls.append(op["index"])
            else:
                run.unknown_polls.append(op["index"])
        elif f == SHARE_POLL:
            value = op.get("value")
            got = value.get("records") if isinstance(value, dict) else None
            n = len(got) if isinstance(got, list) else 0
            run.polls.setdefault(p, []).append((op["index"], op["time"], n))
        elif f == SHARE_OFFSETS and op["type"] == OK:
            o = next((o for o in run.share.offsets if o.index == op["index"]), None)
            if o is not None:
                at = inv["time"] if inv is not None else op["time"]
                run.offsets.append(Offsets(o.index, p, at, o.time, o.start, o.lag))
    run.faults = windows(r for r in rows if r["process"] in FAULT_PROCESSES)
    return run


def off_windows(ops: list[dict[str, Any]], spec: Mapping[str, Any]) -> list[tuple[int, int]]:
    """When share groups may have been off (ns): from the start when the header says the
    storage was formatted with share.version 0, and from the invocation of each feature step
    that set it to 0 (ok, or info: it may have), each until the completion of the next ok
    step that set it above 0, plus FAULT_TAIL_NS (brokers learn the level from the metadata
    log a little later); to the end when none did."""
    out: list[tuple[int, int]] = []
    since = 0 if spec.get(SHARE_VERSION_FIELD) == 0 else None
    inv: Mapping[str, Any] | None = None
    for op in ops:
        if op["process"] != STEP_PROCESS or op["f"] != FEATURES_F:
            continue
        if op["type"] == INVOKE:
            inv = op  # one step at a time: its completion comes next
            continue
        inv, done = None, inv or op
        value = done.get("value")
        params = (value.get("params") if isinstance(value, dict) else None) or {}
        level = (params.get("levels") or {}).get(SHARE_VERSION)
        if isinstance(level, bool) or not isinstance(level, int) or params.get("dry_run"):
            continue
        if level == 0 and since is None and op["type"] != FAIL:
            since = done["time"]
        elif level > 0 and since is not None and op["type"] == OK:
            out.append((since, op["time"] + FAULT_TAIL_NS))
            since = None
    if since is not None:
        out.append((since, END_NS))
    return out


def windows(rows: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """The fault windows (ns) of the nemesis, upgrade and migration op rows, as
    scan/fault_windows.py reads them: each fault's outer span (from its start's invocation to
    the completion of the stop or heal that ended it), and every other op of theirs from its
    invocation to its completion, each with FAULT_TAIL_NS after it; not those that act on no
    node."""
    faults = fault_windows([dict(r) for r in rows], (), TIME)
    # A fault whose effects name no node (a client paused or killed, nemesis/client.py) moves
    # no share-partition leader or coordinator: the lock rules judge what it does.
    spans = [s.outer for s in faults.spans if s.nodes != frozenset()] + [
        (o.start, o.end) for o, hit in faults.others if hit != frozenset()
    ]
    return [(int(a * 1e9), _ns(b) + FAULT_TAIL_NS) for a, b in spans]


def _ns(seconds: float) -> int:
    return END_NS if math.isinf(seconds) else int(seconds * 1e9)


def _values(value: Any) -> list[int]:
    """The values a send or txn invocation sends."""
    if not isinstance(value, list):
        return []
    return [m[2] for m in value if isinstance(m, list) and len(m) == 3 and m[0] == SEND]


def _sent(run: ShareRun, op: Mapping[str, Any], inv: Mapping[str, Any] | None) -> None:
    at = inv["time"] if inv is not None else op["time"]
    for m in op.get("value") or []:
        if not (isinstance(m, list) and len(m) == 3 and m[0] == SEND and isinstance(m[2], list)):
            continue
        offset, value = m[2]
        if isinstance(offset, int) and isinstance(value, int):
            run.sent[(m[1], offset)] = Sent(op["index"], value, run.invoked_at.get(value, at))


def _log_read(run: ShareRun, op: Mapping[str, Any]) -> None:
    for m in op.get("value") or []:
        if not (isinstance(m, list) and len(m) == 2 and isinstance(m[1], dict)):
            continue
        for k, read in m[1].items():
            offsets = [r[0] for r in read if isinstance(r, list) and r and isinstance(r[0], int)]
            if offsets and str(k).isdigit():
                key = int(k)
                run.log_start[key] = min(run.log_start.get(key, offsets[0]), min(offsets))


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


# -- pairing acknowledgements with what was heard of them, and with the delivery they answer ----
@dataclass(frozen=True)
class Answered:
    """An acknowledgement sent, the outcomes heard of it (none: never heard), and the delivery
    it acknowledged: the sender's latest delivery of the record before it was sent."""

    ack: Ack
    outcomes: tuple[Outcome, ...]
    delivery: Delivery | None

    @property
    def ok(self) -> bool:
        return any(o.outcome == OUTCOME_OK for o in self.outcomes)

    @property
    def refused(self) -> bool:
        """Certainly not applied: every outcome heard is a refusal, and one was heard."""
        return bool(self.outcomes) and all(o.outcome.startswith(REFUSED) for o in self.outcomes)


def answered(share: ShareOps) -> list[Answered]:
    """Every acknowledgement sent, in index order. An outcome heard by process p of (key,
    offset) is the outcome of p's latest acknowledgement of it sent before the op it came in
    (docs/history.md)."""
    acks: dict[tuple[Any, int, int], list[Ack]] = defaultdict(list)
    for a in sorted(share.acks, key=lambda a: a.index):
        acks[(a.process, a.key, a.offset)].append(a)
    heard: dict[int, list[Outcome]] = defaultdict(list)
    for o in sorted(share.outcomes, key=lambda o: o.index):
        before = [a for a in acks.get((o.process, o.key, o.offset), []) if a.index < o.index]
        if before:
            heard[id(before[-1])].append(o)
    delivered: dict[tuple[Any, int, int], list[Delivery]] = defaultdict(list)
    for d in sorted(share.deliveries, key=lambda d: d.index):
        delivered[(d.process, d.key, d.offset)].append(d)
    out = []
    for a in sorted(share.acks, key=lambda a: a.index):
        prior = [d for d in delivered.get((a.process, a.key, a.offset), []) if d.index < a.index]
        out.append(Answered(a, tuple(heard.get(id(a), ())), prior[-1] if prior else None))
    return out
