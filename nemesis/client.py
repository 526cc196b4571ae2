"""Faults on the client side: one worker slot's client paused, killed or held at a point, and a
transactional producer's id taken over by a second producer.

``hijack`` is zombie fencing made on purpose (redpanda-data/chaos has the same fault): a second
producer, in the harness process, calls InitProducerId (``init_transactions``) with one of the
run's transactional ids, chosen with the step's seed among the workload's (its ``hints``, one
id per worker slot). KIP-98: InitPidRequest "Bumps up the epoch of the PID, so that any previous
zombie instance of the producer is fenced off and cannot move forward with its transaction".
The slot's running producer is that zombie from then on: its transaction in progress is aborted
by the coordinator, and none of its later sends or commits may take effect
(checkers/families/fenced_acks.py judges the history). The queue workload retires a process
whose producer is fenced; its replacement calls InitProducerId again and fences the hijacker in
turn, which is how a real deployment recovers. The hijacker holds the id until the step's stop
(it begins no transaction); stop and heal drop it.

The other kinds act on one slot's client in an OS process of its own (nemesis/targets.py
``ClientProcess``, the workload's ``CLIENT_PROCS_HINT``), which a run has only when its
generator says ``client_procs`` (``needs_processes``: a plan whose --nemesis names one of them).
``pause`` stops the slot's process (SIGSTOP, then SIGCONT), ``kill`` ends it (SIGKILL: its op in
flight ends `info`, its slot goes on as a new process in a fresh one), and ``pause-send``,
``pause-commit``, ``pause-abort`` hold the client just before its next send, commitTransaction
or abortTransaction (a hook inside the client) until released, and ``isolate`` cuts the slot's
client from the brokers: every packet of its network dropped (each slot's client runs in a network
namespace of its own on the cluster's network, clusters/client_net.py, given by the harness as
``CLIENT_NETS_HINT`` when the generator says ``client_nets``). A pause, hold or cut lasts the drawn
``length``, or less if the step's stop comes first: ``long`` outlasts every timeout the run's
client has (the workload's ``CLIENT_TIMEOUTS_HINT``: transaction.timeout.ms plus the
coordinator's check for timed-out transactions, session.timeout.ms, the share lock) by
``MARGIN_S``, ``short`` is half the shortest of them; the start's value records both, with the
slot, its process, the pid and the point. A transactional producer held or stopped past its
transaction's timeout is a zombie: the coordinator aborts its transaction and bumps its epoch,
so its commit must fail (checkers/families/zombie_commit.py).

Nothing on any node is touched: every effect names no node. What is stopped or held is a child
of the harness: heal continues and releases it, and a harness that dies leaves a stopped JVM
recorded in ``STOPPED_DIR`` for ``kchaos heal`` to continue (a running JVM exits with its stdin).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from history.effects import CUT, DOWN, EFFECTS, FENCED, RESUMED, STALLED, STOPPED, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, NotApplied
from nemesis.menu import Kind, Menu, Param, Pick
from nemesis.targets import (
    CLIENT_NETS_HINT,
    CLIENT_PROCS_HINT,
    CLIENT_TIMEOUTS_HINT,
    TXN_IDS_HINT,
    ClientProcess,
)

HIJACK = "hijack"
PAUSE = "pause"
KILL = "kill"
PAUSE_SEND = "pause-send"
PAUSE_COMMIT = "pause-commit"
PAUSE_ABORT = "pause-abort"
ISOLATE = "isolate"
# The hold kinds and the point of the client each holds it before.
HOLDS = {PAUSE_SEND: "send", PAUSE_COMMIT: "commit", PAUSE_ABORT: "abort"}
# The kinds that need each slot's client in a process of its own.
PROCESS_KINDS = (PAUSE, KILL, *HOLDS, ISOLATE)
# The kinds that need each slot's client in a network of its own besides (generator client_nets).
NET_KINDS = (ISOLATE,)
# How the hold kinds that need transactions say so.
TXN_HOLDS = (PAUSE_COMMIT, PAUSE_ABORT)
LENGTH = "length"
SHORT, LONG = "short", "long"
# How far a long pause outlasts the longest timeout: the coordinator's abort and the epoch
# bump take a request or two, and the brokers' clocks tick apart from the harness's.
# 10 s: a hold begins when the slot next reaches its point, seconds after the step's start.
MARGIN_S = 10.0
# Without a timeout to outlast (assigned consumers, no transactions): these lengths.
NO_TIMEOUT_S = {SHORT: 2.0, LONG: 10.0}
# The pairs of timeouts whose sum a paused transactional producer must outlast to be aborted:
# the coordinator looks for expired transactions only every cleanup interval.
TXN_TIMEOUT = "transaction.timeout.ms"
TXN_ABORT_CHECK = "transaction.abort.timed.out.transaction.cleanup.interval.ms"
# Where a stopped client's pid is kept until it is continued, per cluster (a crashed harness
# leaves a stopped JVM that no closed stdin ends).
STOPPED_DIR = Path(tempfile.gettempdir()) / "kchaos-client-stopped"
# What a stopped pid's command line must hold to be continued: the Java client's main class,
# or librdkafka's client child (workloads/client_procs.py; it also dies with its host).
CLIENT_MARKS = (b"KchaosClient", b"workloads.client_procs")
# How long the hijacker's InitProducerId may take: the coordinator first aborts the victim's
# transaction in progress (markers written to its partitions), which takes a while under faults.
INIT_TIMEOUT_S = 30.0

_LENGTH = Pick(LENGTH, (SHORT, LONG))
_NEEDS = " (its clients in processes of their own: set by the plan when --nemesis names it)"

MENU = Menu(
    fault="client",
    meaning="faults of the workload's own clients, one worker slot's at a time",
    kinds=(
        Kind(
            HIJACK,
            "a second producer takes one transactional id over (InitProducerId, KIP-98): the "
            "slot's running producer is fenced, a zombie whose writes must not take effect",
            effects=(FENCED,),
        ),
        # Named only (drawn=False): a bare `client` keeps drawing hijack, as stored plans did.
        Kind(
            PAUSE,
            "one slot's client process stopped (SIGSTOP) for a drawn length, short of or past "
            "its timeouts (transaction, session, share lock), then continued" + _NEEDS,
            reads=(LENGTH,),
            draws=(_LENGTH,),
            drawn=False,
            effects=(STOPPED,),
        ),
        Kind(
            KILL,
            "one slot's client process killed (SIGKILL): its op in flight ends unknown and the "
            "slot goes on as a new process" + _NEEDS,
            drawn=False,
            effects=(DOWN,),
        ),
        *(
            Kind(
                kind,
                f"one slot's client held just before its next {point} "
                f"({'producer.send' if point == 'send' else point + 'Transaction'}) for a drawn "
                "length, then let go" + _NEEDS,
                reads=(LENGTH,),
                draws=(_LENGTH,),
                drawn=False,
                effects=(STALLED,),
            )
            for kind, point in HOLDS.items()
        ),
        Kind(
            ISOLATE,
            "one slot's client cut from the brokers (every packet of its own network namespace "
            "dropped, iptables) for a drawn length, short of or past its timeouts, then mended "
            "(its clients in processes and networks of their own: set by the plan when --nemesis "
            "names it; a Docker cluster)",
            reads=(LENGTH,),
            draws=(_LENGTH,),
            drawn=False,
            effects=(CUT,),
        ),
    ),
    params=(
        Param(
            LENGTH,
            f"how long a pause or hold lasts: {SHORT} (half the client's shortest timeout) or "
            f"{LONG} (its longest, transaction.timeout.ms plus the coordinator's check for "
            f"timed-out transactions, session.timeout.ms or the share lock, + {MARGIN_S:g} s), "
            "from the run's settings at fault time; the step's stop ends it sooner",
            f"{SHORT} or {LONG}",
        ),
    ),
    targets_note="the kind says who: one worker slot's client, by the step's seed",
    effects=(FENCED,),
    stop_effects=(RESUMED,),
)


def needs_processes(kinds: list[str]) -> bool:
    """Does a plan whose client items name `kinds` need each slot's client in a process of its
    own (generator ``client_procs``)?"""
    return any(k in PROCESS_KINDS for k in kinds)


def needs_networks(kinds: list[str]) -> bool:
    """Does a plan whose client items name `kinds` need each slot's client in a network of its
    own (generator ``client_nets``)?"""
    return any(k in NET_KINDS for k in kinds)


def victim_of(hints: dict[str, Any], seed: int) -> tuple[str, int]:
    """(transactional id, worker slot) the step takes over; NotApplied without transactions."""
    ids = list(hints.get(TXN_IDS_HINT) or ())
    if not ids:
        raise NotApplied(
            "client hijack needs a run with transactions (--txn): this run's clients have no "
            "transactional id"
        )
    slot = random.Random(seed).randrange(len(ids))  # hints list the ids in slot order
    return ids[slot], slot


def client_of(kind: str, hints: dict[str, Any], seed: int) -> ClientProcess:
    """The slot's client a step of `kind` acts on, by the step's seed among the slots it can
    act on: a pause or kill any slot that consumes when some do (a share run's consumers),
    a send hold a producing slot; NotApplied with one line when there is none."""
    procs: dict[int, ClientProcess] = hints.get(CLIENT_PROCS_HINT) or {}
    if not procs:
        raise NotApplied(
            f"client {kind} needs each worker slot's client in a process of its own: this "
            "run's clients share one (a pipelined or admin run, or a plan made before the kind)"
        )
    if kind in TXN_HOLDS and not hints.get(TXN_IDS_HINT):
        raise NotApplied(
            f"client {kind} needs a run with transactions (--txn): this run's producers never "
            f"call {HOLDS[kind]}Transaction"
        )
    slots = sorted(procs)
    if kind == PAUSE_SEND or kind in TXN_HOLDS:
        slots = [s for s in slots if "producer" in procs[s].role]
    elif any("consumer" in procs[s].role for s in slots):
        slots = [s for s in slots if "consumer" in procs[s].role]
    if not slots:
        raise NotApplied(f"client {kind}: no worker slot of this run has a producer")
    return procs[random.Random(seed).choice(slots)]


def lengths(timeouts: dict[str, int]) -> dict[str, float]:
    """The short and long pause of a client with `timeouts` (name -> ms), in seconds: half the
    shortest timeout, and the longest bound + MARGIN_S, where a transaction's bound is its
    timeout plus the coordinator's check interval (it aborts only when it looks)."""
    ms = {k: v for k, v in timeouts.items() if k != TXN_ABORT_CHECK}
    if not ms:
        return dict(NO_TIMEOUT_S)
    bounds = dict(ms)
    if TXN_TIMEOUT in bounds:
        bounds[TXN_TIMEOUT] += timeouts.get(TXN_ABORT_CHECK, 0)
    return {
        SHORT: round(max(1.0, min(ms.values()) / 2000), 3),
        LONG: round(max(bounds.values()) / 1000 + MARGIN_S, 3),
    }


def _stopped_file(cluster: str, pid: int) -> Path:
    return STOPPED_DIR / cluster / str(pid)


def _is_client(pid: int) -> bool:
    try:
        line = Path(f"/proc/{pid}/cmdline").read_bytes()
        return any(mark in line for mark in CLIENT_MARKS)
    except OSError:
        return False


class _Fault:
    """One client fault in progress: what ends it, once."""

    def __init__(
        self, kind: str, proc: ClientProcess, pid: int | None, cluster: str, net: Any = None
    ) -> None:
        self.kind = kind
        self.proc = proc
        self.pid = pid
        self.cluster = cluster
        self.net = net  # isolate: the slot's ClientNet
        self.began = time.monotonic()
        self.ended_after_s: float | None = None
        self.timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def end(self) -> bool:
        """Continues or releases the client; False when that was done already."""
        with self._lock:
            if self.ended_after_s is not None:
                return False
            self.ended_after_s = round(time.monotonic() - self.began, 3)
        if self.timer is not None:
            self.timer.cancel()
        if self.kind == PAUSE and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
            _stopped_file(self.cluster, self.pid).unlink(missing_ok=True)
        elif self.kind == ISOLATE:
            with contextlib.suppress(Exception):  # a network gone with its run cuts nothing
                self.net.mend()
        else:
            with contextlib.suppress(Exception):  # a client gone holds nothing
                self.proc.release()
        return True


class ClientNemesis:
    fault = "client"
    menu = MENU
    # (kind, seed) -> its fault in progress; one table for the process, because the heal at a
    # run's end builds the registry's packages anew (nemesis/heal.py).
    _faults: ClassVar[dict[tuple[str, int], _Fault]] = {}

    def __init__(self) -> None:
        self._held: dict[str, Any] = {}  # transactional id -> the hijacking producer

    def check(self, step: FaultStep) -> dict[str, Any]:
        self.menu.check_keys(step)
        params = dict(step.params or {})
        if step.kind in (PAUSE, *HOLDS, ISOLATE) and params.get(LENGTH) not in (SHORT, LONG):
            raise NemesisError(
                f"client {step.kind} needs params {LENGTH}: {SHORT} or {LONG}, not "
                f"{params.get(LENGTH)!r}"
            )
        return params

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        params = self.check(step)
        if step.kind == HIJACK:
            return self._hijack(ctx, step)
        proc = client_of(step.kind, ctx.hints, step.seed)
        pid = proc.pid()
        value: dict[str, Any] = {
            "kind": step.kind,
            "slot": proc.slot,
            "role": proc.role,
            "process": getattr(proc, "process", None),
            "pid": pid,
        }
        if step.kind == ISOLATE:
            return self._isolate(ctx, step, params, proc, value)
        if pid is None:
            raise NotApplied(
                f"client {step.kind}: slot {proc.slot} has no client process now (killed, its "
                "successor not started yet)"
            )
        about = f"slot {proc.slot}'s client (pid {pid})"
        if step.kind == KILL:
            os.kill(pid, signal.SIGKILL)
            value[EFFECTS] = [effect(DOWN, (), by=f"SIGKILL of {about}")]
            return value
        fault = _Fault(step.kind, proc, pid, ctx.topology.cluster)
        if step.kind == PAUSE:
            if not _is_client(pid):
                raise NotApplied(f"client pause: pid {pid} of slot {proc.slot} is gone")
            path = _stopped_file(fault.cluster, pid)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(pid))
            os.kill(pid, signal.SIGSTOP)
            value[EFFECTS] = [effect(STOPPED, (), by=f"SIGSTOP of {about}")]
        else:
            point = HOLDS[step.kind]
            try:
                proc.hold(point)
            except Exception as exc:  # the client is gone or refused: nothing is held
                raise NotApplied(f"client {step.kind}: {about} cannot be held: {exc}") from None
            value["point"] = point
            value[EFFECTS] = [effect(STALLED, (), side="client", by=f"{about} held before {point}")]
        return self._lasting(ctx, step, params, fault, value)

    def _lasting(
        self,
        ctx: FaultContext,
        step: FaultStep,
        params: dict[str, Any],
        fault: _Fault,
        value: dict[str, Any],
    ) -> dict[str, Any]:
        """A fault that lasts its drawn length (or until the step's stop): its timer set."""
        timeouts = dict(ctx.hints.get(CLIENT_TIMEOUTS_HINT) or {})
        length_s = lengths(timeouts)[params[LENGTH]]
        fault.timer = threading.Timer(length_s, fault.end)
        fault.timer.daemon = True
        self._faults[(step.kind, step.seed)] = fault
        fault.timer.start()
        value.update({LENGTH: params[LENGTH], "duration_s": length_s, "timeouts_ms": timeouts})
        return value

    def _isolate(
        self,
        ctx: FaultContext,
        step: FaultStep,
        params: dict[str, Any],
        proc: ClientProcess,
        value: dict[str, Any],
    ) -> dict[str, Any]:
        """The slot's network cut: whichever process serves the slot now or next is cut off,
        so a slot between a kill and its heir is cut all the same (`value`: the start's, its
        `pid` None then)."""
        net = (ctx.hints.get(CLIENT_NETS_HINT) or {}).get(proc.slot)
        if net is None:
            raise NotApplied(
                f"client {ISOLATE} needs each worker slot's client in a network of its own: "
                "this run's clients share the client host's (a plan made before the kind)"
            )
        how = net.cut()
        fault = _Fault(ISOLATE, proc, value["pid"], ctx.topology.cluster, net)
        value[EFFECTS] = [effect(CUT, (), links=(), by=how)]
        return self._lasting(ctx, step, params, fault, value)

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        self.check(step)
        if step.kind == HIJACK:
            victim, slot = victim_of(ctx.hints, step.seed)
            held = self._held.pop(victim, None) is not None
            return {"kind": HIJACK, "victim": victim, "slot": slot, "released": held, EFFECTS: []}
        fault = self._faults.pop((step.kind, step.seed), None)
        if fault is None:
            # A kill ends nothing (the workload starts the slot's next process); a start that
            # did not apply left nothing either.
            return {"kind": step.kind, "ended": False, EFFECTS: []}
        ended_now = fault.end()
        return {
            "kind": step.kind,
            "slot": fault.proc.slot,
            "pid": fault.pid,
            # By the step's stop, or earlier by the drawn length's timer.
            "ended_by": "stop" if ended_now else "length",
            "ended_after_s": fault.ended_after_s,
            EFFECTS: [effect(RESUMED, (), by=f"slot {fault.proc.slot}'s client let go")]
            if ended_now
            else [],
        }

    def _hijack(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        from confluent_kafka import KafkaException, Producer

        victim, slot = victim_of(ctx.hints, step.seed)
        producer = Producer(
            {
                "bootstrap.servers": ctx.topology.bootstrap_servers(),
                "transactional.id": victim,
                "log_level": 0,
            }
        )
        began = time.monotonic()
        try:
            producer.init_transactions(INIT_TIMEOUT_S)
        except KafkaException as exc:
            # Whether the coordinator bumped the epoch is unknown: the victim may be fenced.
            raise NemesisError(
                f"client hijack of {victim}: InitProducerId did not complete: {exc}"
            ) from None
        self._held[victim] = producer
        return {
            "kind": HIJACK,
            "victim": victim,
            "slot": slot,
            "init_s": round(time.monotonic() - began, 3),
            EFFECTS: [effect(FENCED, (), by=f"InitProducerId of {victim}")],
        }

    def heal_all(self, ctx: FaultContext) -> list[str]:
        released = sorted(self._held)
        self._held.clear()
        done = [f"released the hijacking producer of {t}" for t in released]
        faults = list(self._faults.values())
        self._faults.clear()
        for fault in faults:
            if fault.end():
                slot = fault.proc.slot
                pid = "" if fault.pid is None else f" (pid {fault.pid})"
                done.append(f"ended client {fault.kind} of slot {slot}{pid}")
        return done + continue_stopped(ctx.topology.cluster)


def continue_stopped(cluster: str) -> list[str]:
    """SIGCONT to every client JVM a pause of `cluster`'s runs left stopped (a harness that
    died mid-pause): once continued, it finds its stdin closed and exits."""
    done = []
    folder = STOPPED_DIR / cluster
    for path in sorted(folder.glob("*")) if folder.is_dir() else []:
        with contextlib.suppress(ValueError, OSError):
            pid = int(path.read_text().strip() or path.name)
            if _is_client(pid):
                os.kill(pid, signal.SIGCONT)
                done.append(f"continued the stopped client JVM {pid}")
        path.unlink(missing_ok=True)
    return done
