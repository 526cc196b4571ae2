"""`fenced-producer-ack`: a fenced transactional producer's send or commit acknowledged after its
successor's first commit, from the history alone.

With transactions on, the queue workload gives each worker slot one transactional.id
(`generator.transactional_id`, history/format.TXN_ID_PER_SLOT): process p runs on slot
p mod `generator.concurrency`, and the process replacing a retired one is p + concurrency, so on
one slot a higher process id started later (queue/rules/fencing.py, which judges the same plans
the same way). Before its first transaction a process calls InitProducerId, which bumps the
slot's producer epoch: KIP-98, "Bumps up the epoch of the PID, so that any previous zombie
instance of the producer is fenced off and cannot move forward with its transaction". Under
transaction.version 2 (KIP-890) the epoch is bumped at every commit as well, which fences more,
never less.

So once a later process p' of p's slot has had a transaction committed (an ok `send` or `txn`
holding a send: its commit went through the coordinator under the new epoch, after its
InitProducerId), the coordinator refuses p's EndTxn and the partition leaders p's produce
requests (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH): an ok `send` or `txn` of p holding a send,
completed after p''s first such commit completed, is an acknowledgement Kafka must not give.
One finding per such op, naming it and p''s commit.

The same holds for a hijack (nemesis/client.py): the harness's own producer calls InitProducerId
with slot s's transactional id, recorded as an ok nemesis start whose effects hold `fenced`
(history/effects.py) and whose value names the `slot`. A process p of slot s that had an op
acknowledged before the hijack was invoked had called InitProducerId before it, so the hijack
fenced p: an ok `send` or `txn` of p holding a send, *invoked* after the hijack completed, is
`hijacked-producer-ack` (an op invoked earlier may have committed before the hijack reached the
coordinator, and is not judged; a process whose first acknowledgement came later may have called
InitProducerId after the hijacker and fenced it in turn, and is not judged either).

Not judged, and why: ops that hold no send (a transaction of polls alone may commit without
the coordinator: nothing was added to it), `fail` and `info` ops (nothing acknowledged),
acknowledgements at the very time of the fence or before it, processes that are not clients,
and runs without per-slot transactional ids (queue/rules/fencing.generator_slots: no
transactions, older plans, no plan at all). kchaos's workers run one process of a slot at a
time, a replacement starting after its predecessor's last completion, so on a correct harness
no such pair exists; a finding means Kafka acknowledged a zombie, or the client recorded an
acknowledgement it was not given.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.families.data_log.fencing import RULE as FENCING_RULE
from checkers.scan.fault_windows import TIME, fault_windows
from checkers.scan.op_rows import client_process, row_fields, row_value
from history.effects import FENCED, op_effects, started
from history.format import HELD_FIELD, OK, TXN_ABORT_CHECK, TXN_TIMEOUT_MS

# The ops that write: read whole when the plan names per-slot transactional ids.
ACK_FS = ("send", "txn")

HIJACK_RULE = (
    "a producer whose transactional.id another producer has initialized since (InitProducerId "
    "bumps the epoch: KIP-98, 'so that any previous zombie instance of the producer is fenced "
    "off and cannot move forward with its transaction') is fenced: no send or commit it begins "
    "afterwards is acknowledged"
)

RULE = (
    "once a later process of a slot has committed a transaction under the slot's "
    "transactional.id, the earlier process's producer is fenced: none of its sends or commits "
    "is acknowledged after that (transaction.version 2 bumps the epoch at every commit too, "
    f"KIP-890). {FENCING_RULE}"
)


@dataclass(frozen=True)
class Ack:
    index: int
    process: int
    f: str
    time: int


def acks(rows: Iterable[dict[str, Any]]) -> list[Ack]:
    """Ok ops of client processes that hold a send, in index order."""
    out = []
    for r in rows:
        process = client_process(r["process"])
        if r["type"] != OK or process is None or r.get("time") is None:
            continue
        value = row_value(r)
        if isinstance(value, list) and any(
            isinstance(m, list) and m[:1] == ["send"] for m in value
        ):
            out.append(Ack(int(r["index"]), process, str(r["f"]), int(r["time"])))
    return out


def fenced_acks(rows: Iterable[dict[str, Any]], slots: int) -> tuple[list[Finding], int]:
    """(findings, acknowledged writes judged) of op rows with f in ACK_FS."""
    by_slot: dict[int, dict[int, list[Ack]]] = defaultdict(lambda: defaultdict(list))
    all_acks = acks(rows)
    for a in all_acks:
        by_slot[a.process % slots][a.process].append(a)
    found = []
    for processes in by_slot.values():
        ordered = sorted(processes)
        # The earliest first commit among processes later on the slot than each one.
        fence: Ack | None = None
        for p in reversed(ordered):
            if fence is not None:
                found.extend(
                    fenced_producer_ack(a, fence, slots)
                    for a in processes[p]
                    if a.time > fence.time
                )
            first = min(processes[p], key=lambda a: (a.time, a.index))
            if fence is None or (first.time, first.index) < (fence.time, fence.index):
                fence = first
    return found, len(all_acks)


def fenced_producer_ack(a: Ack, fence: Ack, slots: int) -> Finding:
    slot = a.process % slots
    return Finding(
        "fenced-producer-ack",
        None,
        (min(a.index, fence.index), max(a.index, fence.index)),
        f"op {a.index} ({a.f}) of process {a.process} was acknowledged (ok) at {secs(a.time)}, "
        f"after process {fence.process}'s transaction committed at {secs(fence.time)} (op "
        f"{fence.index}, {fence.f}). Both ran on worker slot {slot} (process mod {slots}) and "
        f"so used one transactional.id; process {fence.process} took the slot after process "
        f"{a.process}, and its InitProducerId, done before that commit, fenced process "
        f"{a.process}'s producer epoch: a fenced producer's send or commit was acknowledged "
        f"after its successor's first commit. Rule: {RULE}",
        {
            "op": a.index,
            "process": a.process,
            "acknowledged_at": a.time,
            "fence": fence.index,
            "fence_process": fence.process,
            "fenced_at": fence.time,
            "slot": slot,
            "rule": RULE,
        },
    )


@dataclass(frozen=True)
class Hijack:
    index: int
    slot: int
    invoked: int
    done: int
    victim: str


def completions(rows: Iterable[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], int | None]]:
    """Each completion row with its invocation's time (None: not in the rows), from rows in
    index order: a process runs one op at a time, so its open invocation is the one."""
    invoked_at: dict[Any, int] = {}
    for r in rows:
        if r.get("time") is None:
            continue
        if r["type"] == "invoke":
            invoked_at[r["process"]] = int(r["time"])
        else:
            yield r, invoked_at.pop(r["process"], None)


def hijacks_of(nemesis_rows: Iterable[dict[str, Any]]) -> list[Hijack]:
    """The ok nemesis starts whose effects say a slot's producer was fenced."""
    out: list[Hijack] = []
    for r, began in completions(nemesis_rows):
        f, value = str(r["f"]), row_value(r)
        if (
            r["type"] == OK
            and began is not None
            and started(f) is not None
            and isinstance(value, dict)
            and isinstance(value.get("slot"), int)
            and any(e.effect == FENCED for e in op_effects(f, value, ()))
        ):
            victim = str(value.get("victim"))
            out.append(Hijack(int(r["index"]), value["slot"], began, int(r["time"]), victim))
    return out


def hijacked_acks(
    rows: Iterable[dict[str, Any]], hijacks: list[Hijack], slots: int
) -> list[Finding]:
    """Findings of op rows with f in ACK_FS, invocations included, against the hijacks."""
    if not hijacks:
        return []
    acked = [  # (ack, its invocation's time)
        (a, began if began is not None else a.time)
        for r, began in completions(rows)
        for a in acks([r])
    ]
    found = []
    for h in hijacks:
        mine = [(a, b) for a, b in acked if a.process % slots == h.slot]
        initialized = {a.process for a, _ in mine if a.time < h.invoked}
        found.extend(
            hijacked_producer_ack(a, began, h, slots)
            for a, began in mine
            if a.process in initialized and began > h.done
        )
    return found


def hijacked_producer_ack(a: Ack, began: int, h: Hijack, slots: int) -> Finding:
    return Finding(
        "hijacked-producer-ack",
        None,
        (min(a.index, h.index), max(a.index, h.index)),
        f"op {a.index} ({a.f}) of process {a.process}, invoked at {secs(began)}, was "
        f"acknowledged (ok) at {secs(a.time)}, after the harness's producer took its "
        f"transactional.id {h.victim} over (op {h.index}: InitProducerId done at "
        f"{secs(h.done)}). Process {a.process} ran on worker slot {h.slot} (process mod "
        f"{slots}) and had an op acknowledged before the hijack began, so its own "
        f"InitProducerId came first and the hijack fenced it: a zombie's send or commit was "
        f"acknowledged. Rule: {HIJACK_RULE}",
        {
            "op": a.index,
            "process": a.process,
            "invoked_at": began,
            "acknowledged_at": a.time,
            "hijack": h.index,
            "hijacked_at": h.done,
            "transactional_id": h.victim,
            "slot": h.slot,
            "rule": HIJACK_RULE,
        },
    )


# -- a producer held before its commit past its transaction's timeout (nemesis/client.py) --

# What the coordinator's abort and its check allow beyond the two timeouts: a request's way to
# the coordinator and the brokers' clock against the harness's (one host's clock here).
ZOMBIE_SLACK_MS = 2000

ZOMBIE_RULE = (
    "a transaction open longer than its transaction.timeout.ms is aborted by its coordinator "
    "(producer javadoc, 3.9 to 4.4: 'The maximum amount of time in milliseconds that a "
    "transaction will remain open before the coordinator proactively aborts it. The start of "
    "the transaction is set at the time that the first partition is added to it.'), which "
    "looks for them every transaction.abort.timed.out.transaction.cleanup.interval.ms ('The "
    "interval at which to rollback transactions that have timed out') and aborts them with the "
    "producer's epoch bumped, so that the zombie's later EndTxn is refused (KIP-98, KIP-360; "
    "the Java client reports ProducerFencedException, InvalidProducerEpochException, or, as "
    "4.4.0 was seen to, InvalidTxnStateException): a commit "
    "the client first called more than the timeout, the check interval and "
    f"{ZOMBIE_SLACK_MS / 1000:g} s after the transaction's first send was acknowledged (its "
    "partition had been added by then) must not succeed"
)


@dataclass(frozen=True)
class HeldCommit:
    index: int
    process: int
    f: str
    type: str
    done: int
    first_ack: int  # ns: the transaction had begun at the coordinator by then
    asked: int  # ns: the client asked for the commit
    sent: int  # ns: commitTransaction was called no earlier (asked + held)
    bound_ms: int  # the timeout and the check interval


def held_commits(rows: Iterable[dict[str, Any]]) -> list[HeldCommit]:
    """Completions of `send` and `txn` ops whose commit the client held (history.format.
    HELD_FIELD) after one of their sends was acknowledged."""
    out = []
    for r in rows:
        process = client_process(r["process"])
        # With --txn every write is a transaction: a `send` op too (one send, then commit).
        if r["type"] == "invoke" or r["f"] not in ACK_FS or process is None:
            continue
        if r.get("time") is None:
            continue
        held = row_fields(r).get(HELD_FIELD)
        if not isinstance(held, dict) or held.get("point") != "commit":
            continue
        first, asked, ms = held.get("first_ack"), held.get("asked"), held.get("ms")
        timeout, check = held.get(TXN_TIMEOUT_MS), held.get(TXN_ABORT_CHECK)
        if not all(isinstance(v, int) for v in (first, asked, ms, timeout, check)):
            continue
        out.append(
            HeldCommit(
                int(r["index"]),
                process,
                str(r["f"]),
                str(r["type"]),
                int(r["time"]),
                first,
                asked,
                asked + ms * 1_000_000,
                timeout + check,
            )
        )
    return out


def other_faults(nemesis_rows: Iterable[dict[str, Any]]) -> list[tuple[int, int | None]]:
    """(from, to) ns of every fault that acts on some node (scan/fault_windows.py's outer spans,
    and its other ops: heals, stops that restarted JVMs), None: to the end. A client fault
    (nemesis/client.py) names no node: it moves no coordinator."""
    faults = fault_windows([dict(r) for r in nemesis_rows], (), TIME)
    spans = [s.outer for s in faults.spans if s.nodes != frozenset()] + [
        (o.start, o.end) for o, hit in faults.others if hit != frozenset()
    ]
    return [(int(x * 1e9), None if math.isinf(y) else int(y * 1e9)) for x, y in spans]


def zombie_commits(
    rows: Iterable[dict[str, Any]], nemesis_rows: Iterable[dict[str, Any]]
) -> tuple[list[Finding], int, int]:
    """(findings, held commits judged, held commits past the bound not judged because another
    package's fault overlapped: a coordinator that moved may commit before its first check)."""
    spans = other_faults(nemesis_rows)
    found, judged, skipped = [], 0, 0
    for h in held_commits(rows):
        if h.sent - h.first_ack <= (h.bound_ms + ZOMBIE_SLACK_MS) * 1_000_000:
            continue  # not provably past the timeout: Kafka may commit it
        if any(a <= h.sent and (b is None or b >= h.first_ack) for a, b in spans):
            skipped += 1
            continue
        judged += 1
        if h.type == OK:
            found.append(zombie_commit(h))
    return found, judged, skipped


def zombie_commit(h: HeldCommit) -> Finding:
    late_s = (h.sent - h.first_ack) / 1e9
    # Unheld (ms 0): a run with client faults records every commit; a SIGSTOP or a network
    # cut of the client came between its sends and its commit.
    how = "held before its commit, called" if h.sent > h.asked else "not held, asked for"
    return Finding(
        "zombie-commit",
        None,
        (h.index, h.index),
        f"op {h.index} ({h.f}) of process {h.process} committed (ok) at {secs(h.done)}, yet its "
        f"first send was acknowledged at {secs(h.first_ack)} and the client, {how} "
        f"commitTransaction no earlier than {secs(h.sent)}: {late_s:.1f} s "
        f"later, past the {h.bound_ms / 1000:g} s of transaction.timeout.ms and the "
        f"coordinator's check interval (+ {ZOMBIE_SLACK_MS / 1000:g} s). The coordinator must "
        f"have aborted the transaction and fenced the producer: a zombie's commit succeeded. "
        f"Rule: {ZOMBIE_RULE}",
        {
            "op": h.index,
            "process": h.process,
            "first_ack_at": h.first_ack,
            "commit_sent_after": h.sent,
            "committed_at": h.done,
            "bound_ms": h.bound_ms,
            "rule": ZOMBIE_RULE,
        },
    )
