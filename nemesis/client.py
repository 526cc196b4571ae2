"""Faults on the client side: a transactional producer's id taken over by a second producer.

``hijack`` is zombie fencing made on purpose (redpanda-data/chaos has the same fault): a second
producer, in the harness process, calls InitProducerId (``init_transactions``) with one of the
run's transactional ids, chosen with the step's seed among the workload's (its ``hints``, one
id per worker slot). KIP-98: InitPidRequest "Bumps up the epoch of the PID, so that any previous
zombie instance of the producer is fenced off and cannot move forward with its transaction".
The slot's running producer is that zombie from then on: its transaction in progress is aborted
by the coordinator, and none of its later sends or commits may take effect
(checkers/families/fenced_acks.py judges the history). The queue workload retires a process
whose producer is fenced; its replacement calls InitProducerId again and fences the hijacker in
turn, which is how a real deployment recovers.

The hijacker holds the id until the step's stop (it begins no transaction); stop and heal drop
it. It lives only in the harness process, so nothing on any node needs undoing, and a harness
that dies takes it along. No node is touched: the start's one effect, ``fenced``, names no node,
and its value names the worker slot whose producer it fenced.
"""

from __future__ import annotations

import random
import time
from typing import Any

from history.effects import EFFECTS, FENCED, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, NotApplied
from nemesis.menu import Kind, Menu
from nemesis.targets import TXN_IDS_HINT

HIJACK = "hijack"
# How long the hijacker's InitProducerId may take: the coordinator first aborts the victim's
# transaction in progress (markers written to its partitions), which takes a while under faults.
INIT_TIMEOUT_S = 30.0

MENU = Menu(
    fault="client",
    meaning="faults of the workload's own clients (transactional producers)",
    kinds=(
        Kind(
            HIJACK,
            "a second producer takes one transactional id over (InitProducerId, KIP-98): the "
            "slot's running producer is fenced, a zombie whose writes must not take effect",
        ),
    ),
    targets_note="the kind says who: one of the run's transactional ids, by the step's seed",
    effects=(FENCED,),
)


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


class ClientNemesis:
    fault = "client"
    menu = MENU

    def __init__(self) -> None:
        self._held: dict[str, Any] = {}  # transactional id -> the hijacking producer

    def check(self, step: FaultStep) -> dict[str, Any]:
        self.menu.check_keys(step)
        return {}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        from confluent_kafka import KafkaException, Producer

        self.check(step)
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

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        self.check(step)
        victim, slot = victim_of(ctx.hints, step.seed)
        held = self._held.pop(victim, None) is not None
        return {"kind": HIJACK, "victim": victim, "slot": slot, "released": held, EFFECTS: []}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        released = sorted(self._held)
        self._held.clear()
        return [f"released the hijacking producer of {t}" for t in released]
