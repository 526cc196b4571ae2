"""The share workload's operations (docs/history.md, "The share workload"): their names, their
header field, and one reading of them into plain rows for the checks.

Share consumers (KIP-932) write four operations beside the queue's `send`s: `share-subscribe`
(a consumer joins the group), `share-poll` (records handed over, each with its delivery count;
the acknowledgements the poll itself carries), `share-ack` (acknowledgements committed with
commitSync) and `share-offsets` (the group's share-partition start offsets, asked of the
brokers). Every value is plain JSON; `read_share` checks their shapes and flattens them into
deliveries, acknowledgements sent and outcomes heard, each naming its op. It reads op dicts as
the JSONL reader gives them (`history.reader.read_history`) and as a built history's op rows
give them (`value` parsed from `value_json`), so a check needs nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history.columnar import read_ops
from history.errors import HistoryError
from history.format import CLIENT_PROCESS_TEXT, INVOKE, NIL_PROCESS, OK, is_int64

SHARE_SUBSCRIBE = "share-subscribe"
SHARE_POLL = "share-poll"
SHARE_ACK = "share-ack"
SHARE_OFFSETS = "share-offsets"
SHARE_FS = frozenset({SHARE_SUBSCRIBE, SHARE_POLL, SHARE_ACK, SHARE_OFFSETS})

# The header field (an object) saying how the share consumers ran: the group, its topic, the
# acquisition lock and delivery count limit the brokers were given, the acknowledgement mode of
# each consumer slot, the generator's rates (docs/history.md).
SHARE_FIELD = "share"
# In it on Kafka 4.1 (share groups off unless finalized): the share.version level the storage
# was formatted with, 0 when a feature step of the run turns share groups on.
SHARE_VERSION_FIELD = "share_version"

# Acknowledgement types, as the history spells them (Kafka's AcknowledgeType, lower case).
ACCEPT, RELEASE, REJECT, RENEW = "accept", "release", "reject", "renew"
ACK_TYPES = (ACCEPT, RELEASE, REJECT, RENEW)
# What the generator may draw for a delivered record: a type, or none (the record is left
# unacknowledged past its acquisition lock).
NONE = "none"
ACK_CHOICES = (*ACK_TYPES, NONE)
# Acknowledgement modes (the consumer's `share.acknowledgement.mode`).
EXPLICIT, IMPLICIT = "explicit", "implicit"
ACK_MODES = (EXPLICIT, IMPLICIT)
# An outcome that is not an error.
OUTCOME_OK = "ok"
# Where an acknowledgement was sent from: carried by a poll, or committed by commitSync.
VIA_POLL, VIA_COMMIT = "poll", "commit"
# Where an outcome was heard: commitSync's answer per partition, or the acknowledgement commit
# callback (which reports a set of offsets of one partition at a time).
FROM_COMMIT, FROM_CALLBACK = "commit", "callback"


@dataclass(frozen=True)
class Delivery:
    """One record handed to a consumer by an ok `share-poll`."""

    index: int  # the poll's completion
    process: int | str
    key: int
    offset: int
    value: int | None
    count: int | None  # ConsumerRecord.deliveryCount(); None where the client gave none
    invoked: int  # the poll's invocation time (ns)
    completed: int  # its completion time (ns)
    handed: int | None  # when poll() returned it, in the JVM, on the history's clock
    lock_ms: int | None  # the acquisition lock the broker last gave this consumer


@dataclass(frozen=True)
class Ack:
    """One acknowledgement sent: by a `share-poll` (carried) or a `share-ack` (commitSync)."""

    index: int  # the invocation
    process: int | str
    key: int
    offset: int
    type: str  # ACK_TYPES
    via: str  # VIA_POLL or VIA_COMMIT
    invoked: int
    completion: str | None  # the op's completion type; None: never completed


@dataclass(frozen=True)
class Outcome:
    """What the consumer heard of acknowledgements of (key, offset): commitSync's answer for
    its partition, or the callback's. `outcome` is OUTCOME_OK or the exception's text."""

    index: int  # the completion it came in
    process: int | str
    key: int
    offset: int
    outcome: str
    source: str  # FROM_COMMIT or FROM_CALLBACK
    time: int


@dataclass(frozen=True)
class StartOffsets:
    """The group's share-partition start offsets as one `share-offsets` op read them."""

    index: int
    process: int | str
    time: int
    start: dict[int, int | None]
    lag: dict[int, int | None]


@dataclass
class ShareOps:
    deliveries: list[Delivery] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    offsets: list[StartOffsets] = field(default_factory=list)
    # The records each consumer process deliberately left unacknowledged (share-ack `held`).
    held: list[tuple[int, int | str, int, int]] = field(default_factory=list)
    # The acknowledgement mode of each consumer process (its share-subscribe).
    modes: dict[int | str, str] = field(default_factory=dict)
    # When each consumer process's first share-subscribe was invoked (ns): its client holds no
    # acquisition from before then (a share consumer fetches only once subscribed).
    subscribed: dict[int | str, int] = field(default_factory=dict)


def read_share(ops: Iterable[Mapping[str, Any]], path: str = "history") -> ShareOps:
    """The share operations of `ops` (in index order, invocations before their completions),
    flattened; HistoryError naming the op for a value that is not the documented shape."""
    out = ShareOps()
    open_: dict[Any, Mapping[str, Any]] = {}
    for op in ops:
        f = op.get("f")
        if f not in SHARE_FS:
            continue
        p = op["process"]
        if op["type"] == INVOKE:
            open_[p] = op
            _read_invocation(out, op, path)
        else:
            inv = open_.pop(p, None)
            _read_completion(out, op, inv, path)
    for inv in open_.values():
        _acks_sent(out, inv, None, path)
    return out


def read_share_parquet(path: str | Path) -> ShareOps:
    """`read_share` of a history.parquet's share op rows."""
    columns = ["index", "type", "f", "process", "time", "value_json"]
    rows = read_ops(path, fs=sorted(SHARE_FS), columns=columns).sort_by("index").to_pylist()
    return read_share(ops_of_rows(rows), str(path))


def ops_of_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Op rows of the columnar form (history/columnar.py) as the JSONL reader gives the ops:
    `value` parsed from `value_json`, client processes as ints again."""
    client = re.compile(CLIENT_PROCESS_TEXT)
    ops = []
    for r in rows:
        p = r["process"]
        if client.fullmatch(p) and p != NIL_PROCESS:
            p = int(p)
        value = json.loads(r["value_json"]) if r.get("value_json") is not None else None
        ops.append(
            {**{k: r[k] for k in ("index", "type", "f", "time")}, "process": p, "value": value}
        )
    return ops


def _bad(path: str, op: Mapping[str, Any], what: str) -> HistoryError:
    return HistoryError(path, None, f"op {op.get('index')} ({op.get('f')}): {what}")


def _read_invocation(out: ShareOps, op: Mapping[str, Any], path: str) -> None:
    value = op.get("value")
    if not isinstance(value, dict):
        raise _bad(path, op, f"value is {value!r:.60}, expected an object")
    if op["f"] == SHARE_SUBSCRIBE and value.get("ack_mode") not in ACK_MODES:
        raise _bad(path, op, f"ack_mode {value.get('ack_mode')!r} is not one of {ACK_MODES}")
    if op["f"] == SHARE_SUBSCRIBE:
        out.subscribed.setdefault(op["process"], op["time"])


def _read_completion(
    out: ShareOps, op: Mapping[str, Any], inv: Mapping[str, Any] | None, path: str
) -> None:
    f, value = op["f"], op.get("value")
    if not isinstance(value, dict):
        raise _bad(path, op, f"value is {value!r:.60}, expected an object")
    if inv is not None and f in (SHARE_POLL, SHARE_ACK):
        _acks_sent(out, inv, op["type"], path)
    if f == SHARE_SUBSCRIBE:
        if op["type"] == OK:
            out.modes[op["process"]] = value["ack_mode"]
        return
    if op["type"] != OK:
        return
    if f == SHARE_OFFSETS:
        _read_offsets(out, op, value, path)
        return
    if f == SHARE_POLL:
        _read_records(out, op, inv, value, path)
    else:
        _read_commit(out, op, value, path)
        for held in _pairs(value.get("held", []), op, path, "held"):
            out.held.append((op["index"], op["process"], *held))
    _read_acked(out, op, value.get("acked", []), path)


def _acks_sent(out: ShareOps, inv: Mapping[str, Any], done: str | None, path: str) -> None:
    if inv["f"] not in (SHARE_POLL, SHARE_ACK):
        return
    acks = inv["value"].get("acks", [])
    if not isinstance(acks, list):
        raise _bad(path, inv, "acks is not a list")
    via = VIA_POLL if inv["f"] == SHARE_POLL else VIA_COMMIT
    for a in acks:
        if not (isinstance(a, list) and len(a) == 3 and _ints(a[:2]) and a[2] in ACK_TYPES):
            raise _bad(path, inv, f"ack {a!r:.60} is not [key, offset, type]")
        out.acks.append(Ack(inv["index"], inv["process"], a[0], a[1], a[2], via, inv["time"], done))


def _read_records(
    out: ShareOps,
    op: Mapping[str, Any],
    inv: Mapping[str, Any] | None,
    value: dict[str, Any],
    path: str,
) -> None:
    records = value.get("records")
    if not isinstance(records, list):
        raise _bad(path, op, "records is not a list")
    handed, lock = value.get("handed"), value.get("lock_ms")
    if handed is not None and not is_int64(handed):
        raise _bad(path, op, f"handed {handed!r:.40} is not a time in ns")
    if lock is not None and not is_int64(lock):
        raise _bad(path, op, f"lock_ms {lock!r:.40} is not an int")
    invoked = inv["time"] if inv is not None else op["time"]
    for r in records:
        if not (
            isinstance(r, list)
            and len(r) == 4
            and _ints(r[:2])
            and (r[2] is None or is_int64(r[2]))
            and (r[3] is None or is_int64(r[3]))
        ):
            raise _bad(path, op, f"record {r!r:.60} is not [key, offset, value, count]")
        out.deliveries.append(
            Delivery(
                op["index"],
                op["process"],
                r[0],
                r[1],
                r[2],
                r[3],
                invoked,
                op["time"],
                handed,
                lock,
            )
        )


def _read_commit(out: ShareOps, op: Mapping[str, Any], value: dict[str, Any], path: str) -> None:
    """commitSync's answer per partition applies to each ack of this op to that partition."""
    commit = value.get("commit", {})
    if not isinstance(commit, dict):
        raise _bad(path, op, "commit is not an object")
    for a in value.get("acks", []):
        said = commit.get(str(a[0]))
        if said is None:
            continue  # the commit did not answer for the partition
        if not isinstance(said, str):
            raise _bad(path, op, f"commit outcome {said!r:.40} is not a string")
        out.outcomes.append(
            Outcome(op["index"], op["process"], a[0], a[1], said, FROM_COMMIT, op["time"])
        )


def _read_acked(out: ShareOps, op: Mapping[str, Any], acked: Any, path: str) -> None:
    if not isinstance(acked, list):
        raise _bad(path, op, "acked is not a list")
    for heard in acked:
        if not (
            isinstance(heard, list)
            and len(heard) == 3
            and is_int64(heard[0])
            and isinstance(heard[1], list)
            and _ints(heard[1])
            and isinstance(heard[2], str)
        ):
            raise _bad(path, op, f"acked {heard!r:.60} is not [key, [offsets], outcome]")
        key, offsets, outcome = heard
        for o in offsets:
            out.outcomes.append(
                Outcome(op["index"], op["process"], key, o, outcome, FROM_CALLBACK, op["time"])
            )


def _read_offsets(out: ShareOps, op: Mapping[str, Any], value: dict[str, Any], path: str) -> None:
    offsets = value.get("offsets")
    if not isinstance(offsets, dict):
        raise _bad(path, op, "offsets is not an object")
    start: dict[int, int | None] = {}
    lag: dict[int, int | None] = {}
    for k, info in offsets.items():
        if not (isinstance(k, str) and k.isdigit()) or not isinstance(info, dict | None):
            raise _bad(path, op, f"offsets entry {k!r:.20} is not a partition's")
        # null: the brokers named the partition without an offset (no state for it yet).
        s, g = (info.get("start"), info.get("lag")) if info is not None else (None, None)
        if (s is not None and not is_int64(s)) or (g is not None and not is_int64(g)):
            raise _bad(path, op, f"offsets of partition {k} are not ints")
        start[int(k)], lag[int(k)] = s, g
    out.offsets.append(StartOffsets(op["index"], op["process"], op["time"], start, lag))


def _pairs(items: Any, op: Mapping[str, Any], path: str, name: str) -> list[tuple[int, int]]:
    if not isinstance(items, list) or not all(
        isinstance(i, list) and len(i) == 2 and _ints(i) for i in items
    ):
        raise _bad(path, op, f"{name} is not a list of [key, offset]")
    return [(i[0], i[1]) for i in items]


def _ints(xs: Iterable[Any]) -> bool:
    return all(is_int64(x) for x in xs)
