"""A simple, correct Kafka model that writes histories, and the bugs we break it with on purpose.

Partitions are lists of records; transactions take a marker offset on commit or abort; consumers
hold a position per assigned key and read committed records in offset order. Every `info`
retires the process, as the harness does: its slot's next process is p + CONCURRENCY, and with
transactions the slot's transactional.id passes to it, fencing the retired producer (a correct
Kafka never lets the retired producer's later writes commit). Consumers made for injected bugs
and final polls take ids far from the slots' (they never send). Kept small so hypothesis can
shrink failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from history.columnar import to_table
from history.format import CONSUMER_AFTER_ABORT, REWIND
from history.reader import History
from tests.unit.checkers.histories import PIPELINED, H

KEYS = [0, 1, 2]
# Worker slots: two producers then two consumers, processes 0-3 at the start.
CONCURRENCY = 4
EXTRA_PROCESSES = 10_000
# The producer instance of the injected pipelined sends.
PIPELINED_PRODUCER = 7


@dataclass
class Record:
    offset: int
    value: int
    visible: bool = True


@dataclass
class Consumer:
    process: int
    positions: dict[int, int] = field(default_factory=dict)  # key -> next offset to read


class Model:
    def __init__(self) -> None:
        # Consumers behave as kchaos's client does after an abort (REWIND): aborted_poll.
        self.h = H(**{CONSUMER_AFTER_ABORT: REWIND})
        self.logs: dict[int, list[Record]] = {k: [] for k in KEYS}
        self.next_offset = dict.fromkeys(KEYS, 0)
        self.next_value = 1000
        self.producers = [0, 1]
        self.consumers = [Consumer(2), Consumer(3)]
        self.next_process = EXTRA_PROCESSES

    def fresh_process(self) -> int:
        """A process outside the worker slots (a consumer no slot runs)."""
        self.next_process += 1
        return self.next_process - 1

    def retire(self, slot: int) -> int:
        """Producer `slot`'s process saw `info`: its slot's next process takes over."""
        self.producers[slot] += CONCURRENCY
        return self.producers[slot]

    def fresh_value(self) -> int:
        self.next_value += 1
        return self.next_value

    def append(self, k: int, v: int, visible: bool = True) -> int:
        o = self.next_offset[k]
        self.next_offset[k] += 1
        self.logs[k].append(Record(o, v, visible))
        return o

    def marker(self, keys: set[int]) -> None:
        for k in keys:
            self.next_offset[k] += 1  # a commit/abort marker: an offset no poll returns

    # -- correct operations --------------------------------------------------------------

    def send(self, slot: int, k: int, outcome: str) -> None:
        p, v = self.producers[slot], self.fresh_value()
        if outcome == "ok":
            self.h.send(p, k, v, self.append(k, v))
            return
        if outcome == "info-happened":
            self.append(k, v)
        if outcome.startswith("info"):
            self.h.send(p, k, v, None, "info")
            self.retire(slot)
        else:
            self.h.send(p, k, v, None, "fail")

    def txn(self, slot: int, keys: list[int], outcome: str) -> None:
        p = self.producers[slot]
        commits = outcome in ("ok", "info-commit")
        sends = [(k, self.fresh_value()) for k in keys]
        placed = [(k, self.append(k, v, visible=commits), v) for k, v in sends]
        self.marker(set(keys))
        inv = [["send", k, v] for k, v in sends]
        if outcome == "ok":
            self.h.txn(p, inv, [["send", k, [o, v]] for k, o, v in placed])
        else:
            self.h.txn(p, inv, None, "fail" if outcome == "fail" else "info")
            if outcome.startswith("info"):
                self.retire(slot)

    def readable(self, c: Consumer, k: int, limit: int | None) -> list[Record]:
        pos = c.positions[k]
        recs = [r for r in self.logs[k] if r.offset >= pos and r.visible]
        return recs if limit is None else recs[:limit]

    def poll(self, slot: int, limit: int | None) -> None:
        c = self.consumers[slot]
        self.h.poll(c.process, self._read(c, limit))

    def _read(self, c: Consumer, limit: int | None) -> dict[int, list[tuple[int, int]]]:
        reads = {}
        for k in sorted(c.positions):
            recs = self.readable(c, k, limit)
            if recs:
                reads[k] = [(r.offset, r.value) for r in recs]
                c.positions[k] = recs[-1].offset + 1
        return reads

    def aborted_poll(self, slot: int, limit: int | None) -> None:
        """A transaction that polled, then aborted: the fail op says what the poll read, and
        the consumer goes back to where it stood when the transaction began."""
        c = self.consumers[slot]
        before = dict(c.positions)
        reads = self._read(c, limit)
        c.positions = before
        out = [["poll", {str(k): [list(x) for x in xs] for k, xs in reads.items()}]]
        self.h.txn(c.process, [["poll"]], out, "fail")

    def assign(self, slot: int, keys: list[int]) -> None:
        c = self.consumers[slot]
        c.positions = {k: c.positions.get(k, 0) for k in keys}
        self.h.assign(c.process, keys)

    def crash(self, slot: int) -> None:
        c = self.consumers[slot]
        self.h.crash(c.process)
        c.positions = dict.fromkeys(c.positions, 0)  # a fresh client starts from offset 0

    def final_poll(self) -> None:
        c = Consumer(self.fresh_process())
        self.consumers.append(c)
        self.assign(len(self.consumers) - 1, KEYS)
        self.poll(len(self.consumers) - 1, None)

    def apply(self, action: tuple[Any, ...]) -> None:
        getattr(self, action[0])(*action[1:])

    # -- the history ---------------------------------------------------------------------

    def history(self) -> History:
        return self.h.history()

    def table(self) -> Any:
        return to_table(self.history())


# -- strategies -----------------------------------------------------------------------------

keys = st.sampled_from(KEYS)
actions = st.one_of(
    st.tuples(
        st.just("send"),
        st.integers(0, 1),
        keys,
        st.sampled_from(["ok", "ok", "ok", "info-happened", "info-lost", "fail"]),
    ),
    st.tuples(
        st.just("txn"),
        st.integers(0, 1),
        st.lists(keys, min_size=1, max_size=3),
        st.sampled_from(["ok", "ok", "fail", "info-commit", "info-abort"]),
    ),
    st.tuples(st.just("poll"), st.integers(0, 1), st.none() | st.integers(1, 3)),
    st.tuples(st.just("aborted_poll"), st.integers(0, 1), st.none() | st.integers(1, 3)),
    st.tuples(st.just("assign"), st.integers(0, 1), st.lists(keys, unique=True)),
    st.tuples(st.just("crash"), st.integers(0, 1)),
)
action_lists = st.lists(actions, max_size=25)


def run_model(acts: list[tuple[Any, ...]], final_poll: bool = True) -> Model:
    m = Model()
    for a in acts:
        m.apply(a)
    if final_poll:
        m.final_poll()
    return m


# -- injected bugs: each a scenario on key k, in the middle of a correct run -----------------


def _consumer_at_end(m: Model, k: int) -> Consumer:
    """A new consumer of k that has read everything so far."""
    c = Consumer(m.fresh_process())
    m.consumers.append(c)
    slot = len(m.consumers) - 1
    m.assign(slot, [k])
    m.poll(slot, None)
    return c


def _send_ok(m: Model, k: int) -> tuple[int, int]:
    v = m.fresh_value()
    o = m.append(k, v)
    m.h.send(m.producers[0], k, v, o)
    return o, v


def lost_write(m: Model, k: int) -> None:
    _send_ok(m, k)
    m.logs[k][-1].visible = False  # acknowledged, then gone
    _send_ok(m, k)


def unseen(m: Model, k: int) -> None:
    _send_ok(m, k)
    m.logs[k][-1].visible = False  # and nothing after it: lost or unread, who can tell


def duplicate(m: Model, k: int) -> None:
    _, v = _send_ok(m, k)
    m.append(k, v)


def inconsistent_offsets(m: Model, k: int) -> None:
    _send_ok(m, k)
    v = m.fresh_value()
    o = m.append(k, v)
    m.h.send(m.producers[0], k, v, o - 1)  # the ack names the offset of the record before


def g1a(m: Model, k: int) -> None:
    v = m.fresh_value()
    m.append(k, v)  # visible although the send failed
    m.h.send(m.producers[0], k, v, None, "fail")


def garbage_read(m: Model, k: int) -> None:
    m.append(k, m.fresh_value())  # a record nobody sent


def read_from_other_partition(m: Model, k: int) -> None:
    """A value acknowledged on another key whose record also lands in k's partition, where
    consumers of k read it."""
    k2 = KEYS[(KEYS.index(k) + 1) % len(KEYS)]
    v = m.fresh_value()
    m.h.send(m.producers[0], k2, v, m.append(k2, v))
    m.append(k, v)


def precommitted_read(m: Model, k: int) -> None:
    v = m.fresh_value()
    o = m.append(k, v)
    m.marker({k})
    m.h.txn(
        m.producers[0],
        [["send", k, v], ["poll"]],
        [["send", k, [o, v]], ["poll", {str(k): [[o, v]]}]],
    )


def poll_skip(m: Model, k: int) -> None:
    _send_ok(m, k)  # the consumer must have read something to skip from
    c = _consumer_at_end(m, k)
    _send_ok(m, k)
    o2, v2 = _send_ok(m, k)
    m.h.poll(c.process, {k: [(o2, v2)]})
    c.positions[k] = o2 + 1


def nonmonotonic_poll(m: Model, k: int) -> None:
    _send_ok(m, k)
    c = _consumer_at_end(m, k)
    last = [r for r in m.logs[k] if r.visible][-1]
    m.h.poll(c.process, {k: [(last.offset, last.value)]})


def int_poll_skip(m: Model, k: int) -> None:
    c = _consumer_at_end(m, k)
    a, _, b = (_send_ok(m, k) for _ in range(3))
    m.h.poll(c.process, {k: [a, b]})
    c.positions[k] = b[0] + 1


def int_nonmonotonic_poll(m: Model, k: int) -> None:
    c = _consumer_at_end(m, k)
    a, b = (_send_ok(m, k) for _ in range(2))
    m.h.poll(c.process, {k: [b, a]})
    c.positions[k] = b[0] + 1


def _reversed_pair(m: Model, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Two sends to k, the second stored before the first: (first, second) as (offset, value)."""
    v1, v2 = m.fresh_value(), m.fresh_value()
    o2 = m.append(k, v2)
    o1 = m.append(k, v1)
    return (o1, v1), (o2, v2)


def nonmonotonic_send(m: Model, k: int) -> None:
    (o1, v1), (o2, v2) = _reversed_pair(m, k)
    p = m.producers[0]
    m.h.send(p, k, v1, o1).send(p, k, v2, o2)


def int_nonmonotonic_send(m: Model, k: int) -> None:
    (o1, v1), (o2, v2) = _reversed_pair(m, k)
    m.marker({k})
    m.h.txn(
        m.producers[0],
        [["send", k, v1], ["send", k, v2]],
        [["send", k, [o1, v1]], ["send", k, [o2, v2]]],
    )


def int_send_skip(m: Model, k: int) -> None:
    # Not a bug in Kafka (another producer's send lands inside the transaction's range): the
    # checker must still name it, and tolerate it.
    v1, v2 = m.fresh_value(), m.fresh_value()
    o1 = m.append(k, v1)
    _send_ok(m, k)  # producer 0 sends in between; the txn runs on producer 1
    o2 = m.append(k, v2)
    m.marker({k})
    m.h.txn(
        m.producers[1],
        [["send", k, v1], ["send", k, v2]],
        [["send", k, [o1, v1]], ["send", k, [o2, v2]]],
    )


def _crossed_txns(m: Model, k: int, see_each_other: bool) -> None:
    """Two concurrent transactions on k and k2; with `see_each_other`, each polls the other's
    send although neither had committed (G1c); otherwise their sends interleave (G0)."""
    k2 = KEYS[(KEYS.index(k) + 1) % len(KEYS)]
    a, b = m.producers
    va, vb, wa, wb = (m.fresh_value() for _ in range(4))
    oa = m.append(k, va)
    ob = m.append(k2, vb)
    owb = m.append(k, wb)  # b's send to k lands after a's ...
    owa = m.append(k2, wa)  # ... and a's send to k2 after b's: a ww cycle
    m.marker({k, k2})
    ia = [["send", k, va], ["send", k2, wa]]
    ib = [["send", k2, vb], ["send", k, wb]]
    ra = [["send", k, [oa, va]], ["send", k2, [owa, wa]]]
    rb = [["send", k2, [ob, vb]], ["send", k, [owb, wb]]]
    if see_each_other:
        ia, ib = [*ia, ["poll"]], [*ib, ["poll"]]
        ra = [*ra, ["poll", {str(k2): [[ob, vb]]}]]
        rb = [*rb, ["poll", {str(k): [[oa, va]]}]]
    m.h.invoke(a, "txn", ia).invoke(b, "txn", ib)
    m.h.complete(a, "txn", "ok", ra).complete(b, "txn", "ok", rb)


def g0(m: Model, k: int) -> None:
    _crossed_txns(m, k, see_each_other=False)


def g1c(m: Model, k: int) -> None:
    _crossed_txns(m, k, see_each_other=True)


def fenced_producer_read(m: Model, k: int) -> None:
    p = m.producers[0]
    v = m.fresh_value()
    m.h.send(p, k, v, None, "info")  # timed out: still in flight when p retires
    m.retire(0)
    _send_ok(m, k)  # p's successor writes: its InitProducerId fenced p first
    m.append(k, v)  # ... yet p's record lands after that write, and commits


def producer_nonmonotonic_send(m: Model, k: int) -> None:
    """Two pipelined sends of one idempotent producer, on two of its lanes (the model's two
    sending processes, one op each), both in flight at once, stored in reverse send order."""
    m.h.header.update(PIPELINED)
    (o1, v1), (o2, v2) = _reversed_pair(m, k)
    a, b = m.producers
    q = PIPELINED_PRODUCER
    m.h.invoke_send(a, q, k, v1).invoke_send(b, q, k, v2)
    m.h.complete_send(b, q, k, v2, o2).complete_send(a, q, k, v1, o1)


def g1c_realtime(m: Model, k: int) -> None:
    v = m.fresh_value()
    c = _consumer_at_end(m, k)
    o = m.next_offset[k]
    m.h.poll(c.process, {k: [(o, v)]})  # reads v ...
    c.positions[k] = o + 1
    m.append(k, v)
    m.h.send(m.producers[0], k, v, o)  # ... which is sent only after that poll completed


INJECTIONS = {
    "lost-write": lost_write,
    "unseen": unseen,
    "duplicate": duplicate,
    "inconsistent-offsets": inconsistent_offsets,
    "G1a": g1a,
    "garbage-read": garbage_read,
    "read-from-other-partition": read_from_other_partition,
    "precommitted-read": precommitted_read,
    "poll-skip": poll_skip,
    "nonmonotonic-poll": nonmonotonic_poll,
    "int-poll-skip": int_poll_skip,
    "int-nonmonotonic-poll": int_nonmonotonic_poll,
    "nonmonotonic-send": nonmonotonic_send,
    "int-nonmonotonic-send": int_nonmonotonic_send,
    "int-send-skip": int_send_skip,
    "G0": g0,
    "G1c": g1c,
    "G1c-realtime": g1c_realtime,
    "fenced-producer-read": fenced_producer_read,
    "producer-nonmonotonic-send": producer_nonmonotonic_send,
}
