"""Pipelined histories (docs/history.md, "Pipelined sends") from a correct model of idempotent
producers, and the one bug we break it with: two acknowledged sends of one producer to one key
stored in reverse send order.

Each worker slot runs one producer with LANES process ids (its lanes, slot s's first ones s*LANES
to s*LANES + LANES - 1); a send is invoked on a free lane and completes in any order. The broker
appends each producer's sends to a key in the order they were sent (what KIP-98's idempotent
producer promises), interleaved in any way with other producers' sends; `ok` only after the
append. A lane whose send ended `info` retires (p -> p + CONCURRENCY * LANES); a producer
replaced (a fatal error) completes its sends in flight `info` and its slot's next producer is
producer + CONCURRENCY. A final poll reads every key whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from hypothesis import strategies as st

from history.columnar import to_table
from history.format import CONSUMER_AFTER_ABORT, IN_FLIGHT_FIELD, REWIND
from tests.unit.checkers.histories import PIPELINED, H

KEYS = [0, 1, 2]
CONCURRENCY = 2
LANES = 3
STRIDE = 1_000_000_000
READER = 100_000  # the final poll's process, far from every lane


@dataclass
class Send:
    lane: int
    producer: int
    key: int
    value: int
    invoked: int  # history index of the invocation: the producer's send order
    offset: int | None = None  # once appended
    completion: int | None = None  # history index of the completion
    type: str | None = None
    acked_at: int | None = None  # the offset its `ok` completion names

    @property
    def acked(self) -> bool:
        """Acknowledged with its offset: what the producer-order rule compares."""
        return self.type == "ok" and self.acked_at is not None


@dataclass
class Producer:
    id: int
    lanes: list[int]
    busy: dict[int, Send] = field(default_factory=dict)  # lane position -> send in flight
    queued: dict[int, list[Send]] = field(default_factory=dict)  # key -> not yet appended
    sent: int = 0


class PipelinedModel:
    def __init__(self) -> None:
        self.h = H(**{**PIPELINED, IN_FLIGHT_FIELD: LANES, CONSUMER_AFTER_ABORT: REWIND})
        self.logs: dict[int, list[Send]] = {k: [] for k in KEYS}
        self.producers = [
            Producer(s, [s * LANES + j for j in range(LANES)]) for s in range(CONCURRENCY)
        ]
        self.sends: list[Send] = []

    # -- actions ---------------------------------------------------------------------------

    def invoke(self, slot: int, k: int) -> None:
        p = self.producers[slot]
        free = [j for j in range(LANES) if j not in p.busy]
        if not free:
            return
        p.sent += 1
        s = Send(p.lanes[free[0]], p.id, k, p.id * STRIDE + p.sent, len(self.h.lines))
        self.h.invoke_send(s.lane, s.producer, k, s.value)
        p.busy[free[0]] = s
        p.queued.setdefault(k, []).append(s)
        self.sends.append(s)

    def append(self, slot: int, k: int) -> None:
        """The broker appends producer `slot`'s oldest unappended send to k."""
        queue = self.producers[slot].queued.get(k)
        if queue:
            self._append(queue.pop(0))

    def _append(self, s: Send) -> None:
        s.offset = len(self.logs[s.key])
        self.logs[s.key].append(s)

    def _append_through(self, p: Producer, s: Send) -> None:
        """s appended, after every earlier send of its producer to its key (send order)."""
        queue = p.queued.get(s.key, [])
        while s in queue:
            self._append(queue.pop(0))

    def _drop(self, p: Producer, s: Send) -> None:
        queue = p.queued.get(s.key, [])
        if s in queue:
            queue.remove(s)

    def complete(self, slot: int, pick: int, outcome: str) -> None:
        """A delivery report for one of the producer's sends in flight (any of them)."""
        p = self.producers[slot]
        if not p.busy:
            return
        j = sorted(p.busy)[pick % len(p.busy)]
        s = p.busy.pop(j)
        if outcome == "fail" and s.offset is not None:
            outcome = "info-happened"  # appended already: no definite error can follow
        if outcome in ("ok", "ok-no-offset", "info-happened"):
            self._append_through(p, s)
        else:
            self._drop(p, s)
        self._report(s, outcome)
        if outcome.startswith("info"):
            p.lanes[j] += CONCURRENCY * LANES

    def _report(self, s: Send, outcome: str) -> None:
        s.completion = len(self.h.lines)
        s.type = "ok" if outcome.startswith("ok") else outcome.split("-")[0]
        at = None if outcome == "ok-no-offset" else s.offset
        s.acked_at = at if s.type == "ok" else None
        self.h.complete_send(s.lane, s.producer, s.key, s.value, at, s.type)

    def burst(self, slot: int, k: int, order: list[int]) -> None:
        """Sends to k on every free lane, then each acknowledged, in `order` (a permutation
        of lane positions; positions not in flight are passed over)."""
        p = self.producers[slot]
        for _ in range(LANES - len(p.busy)):
            self.invoke(slot, k)
        for j in order:
            if j in p.busy:
                self.complete(slot, sorted(p.busy).index(j), "ok")

    def replace(self, slot: int) -> None:
        """A fatal error: the sends in flight end `info` (unappended ones never land), their
        lanes retire, and a new producer takes the slot."""
        p = self.producers[slot]
        for j in sorted(p.busy):
            s = p.busy.pop(j)
            self._drop(p, s)
            self._report(s, "info-lost")
            p.lanes[j] += CONCURRENCY * LANES
        self.producers[slot] = Producer(p.id + CONCURRENCY, p.lanes)

    def apply(self, action: tuple[Any, ...]) -> None:
        getattr(self, action[0])(*action[1:])

    def finish(self, report: bool = True) -> None:
        """The run ends: sends still in flight get `info` ("no delivery report in time"), or
        (`report` False: the run was killed) no completion at all; either way unappended
        ones never land."""
        for p in self.producers:
            for j in sorted(p.busy):
                s = p.busy.pop(j)
                self._drop(p, s)
                if report:
                    self._report(s, "info-lost")

    def final_poll(self) -> None:
        self.h.assign(READER, KEYS)
        reads = {k: [(s.offset, s.value) for s in log] for k, log in self.logs.items() if log}
        self.h.poll(READER, reads)  # type: ignore[arg-type]

    # -- the bug ---------------------------------------------------------------------------

    def swappable(self) -> list[tuple[Send, Send]]:
        """Pairs (a, b) of one producer's acknowledged sends to one key, a sent before b, with
        no send of that producer between them in the key's log: swapping their records
        reorders exactly that pair."""
        out = []
        for log in self.logs.values():
            by_producer: dict[int, list[Send]] = {}
            for s in log:
                by_producer.setdefault(s.producer, []).append(s)
            for sends in by_producer.values():
                out += [(a, b) for a, b in pairwise(sends) if a.acked and b.acked]
        return out

    def swap(self, a: Send, b: Send) -> None:
        """a's and b's records change places in the log, and their acks say so."""
        log = self.logs[a.key]
        oa, ob = a.offset, b.offset
        assert oa is not None and ob is not None
        log[oa], log[ob] = b, a
        a.offset, b.offset = ob, oa
        a.acked_at, b.acked_at = ob, oa
        for s in (a, b):
            assert s.completion is not None
            self.h.lines[s.completion]["value"] = [["send", s.key, [s.offset, s.value]]]

    # -- the history -----------------------------------------------------------------------

    def table(self) -> Any:
        return to_table(self.h.history())


slots = st.integers(0, CONCURRENCY - 1)
keys = st.sampled_from(KEYS)
actions = st.one_of(
    st.tuples(st.just("invoke"), slots, keys),
    st.tuples(st.just("invoke"), slots, keys),
    st.tuples(st.just("append"), slots, keys),
    st.tuples(
        st.just("complete"),
        slots,
        st.integers(0, LANES - 1),
        st.sampled_from(["ok", "ok", "ok", "ok-no-offset", "fail", "info-happened", "info-lost"]),
    ),
    st.tuples(st.just("burst"), slots, keys, st.permutations(range(LANES))),
    st.tuples(st.just("replace"), slots),
)
action_lists = st.lists(actions, max_size=40)


def run_pipelined(acts: list[tuple[Any, ...]], report: bool = True) -> PipelinedModel:
    """A correct pipelined run of `acts`, its in-flight sends ended, without the final poll."""
    m = PipelinedModel()
    for a in acts:
        m.apply(a)
    m.finish(report)
    return m
