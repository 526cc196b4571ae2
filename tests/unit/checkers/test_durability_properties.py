"""The durability family against plain-Python statements of its rules, on generated inputs:
the lost-write judgement (lost.py: windows grouped by rank, judged once per group) against a
rule applied write by write; the per-replica comparison (replicas.py: numpy over each log)
against sets of offsets; and Kafka's correct final states, which must raise nothing."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from checkers.families.data_log.parse import parse_data_log
from checkers.families.durability.lost import (
    DESPITE_FSYNC,
    DOCUMENTED,
    TOO_FEW,
    Judge,
    Writes,
    judge_writes,
)
from checkers.families.durability.partitions import Partitions, State
from checkers.families.durability.polled import Polled, held_by_key, polled_then_gone
from checkers.families.durability.power import DiskFault
from checkers.families.durability.reads import FinalReads
from checkers.families.durability.replicas import (
    DIVERGED,
    MISSING,
    NOT_SERVED,
    compare_own_bounds,
    compare_replicas,
)
from checkers.families.durability.settings import Settings
from tests.unit.checkers.datalogs import B, dump

NODES = ("n1", "n2", "n3")
TOPIC = "kchaos-queue"

# -- lost writes ------------------------------------------------------------------------------


@st.composite
def faults(draw):
    out = []
    t = 0
    for i in range(draw(st.integers(0, 4))):
        t += draw(st.integers(1, 50))
        length = draw(st.integers(1, 5))
        nodes = draw(st.one_of(st.none(), st.frozensets(st.sampled_from(NODES), min_size=1)))
        kind = draw(st.sampled_from(["power-loss", "power-loss", "power-loss", "corrupt"]))
        end = math.inf if nodes is None else float(t + length)
        out.append(
            DiskFault(100 + i, kind, "x", None, t, end, None, None, nodes,
                      "ok" if nodes is not None else "info")
        )  # fmt: skip
        t += length
    return out


@st.composite
def run_settings(draw):
    return Settings(
        3,
        draw(st.integers(1, 4)),
        draw(st.sampled_from([None, 1, 100])),
        draw(st.booleans()),
        draw(st.sampled_from([None, True, False])),
        True,
    )


@st.composite
def lost_writes(draw):
    n = draw(st.integers(1, 12))
    invoked = np.array(draw(st.lists(st.integers(0, 250), min_size=n, max_size=n)), np.int64)
    until = np.array(
        [math.inf if draw(st.booleans()) else float(i + draw(st.integers(1, 100)))
         for i in invoked.tolist()]
    )  # fmt: skip
    return Writes(
        key=np.zeros(n, np.int64),
        value=np.arange(1, n + 1, dtype=np.int64),
        offset=np.arange(n, dtype=np.int64),
        op=np.arange(n, dtype=np.int64),
        acked=np.ones(n, bool),
        invoked=invoked,
        completed=invoked + 1,
        until=until,
        saw=np.zeros(n, np.int64),
        finding=np.full(n, -1, np.int64),
    )


def expected(s: Settings, fs: list[DiskFault], invoked: float, until: float) -> str | None:
    """The rules of lost.py for one write, with no ISR in the history, written out plainly."""
    window = [f for f in fs if f.end > invoked and f.start < until]
    powers = [f for f in window if f.kind == "power-loss"]
    if not powers:
        return TOO_FEW if any(f.kind == "power-loss" for f in fs) else None
    if s.unclean_leader_election:
        return DOCUMENTED
    if any(f.kind != "power-loss" for f in window):
        return None
    if s.flush_messages == 1:
        return DESPITE_FSYNC
    lost: set[str] = set()
    for f in powers:
        lost |= set(NODES) if f.nodes is None else set(f.nodes)
    n = min(len(lost), 3)
    if n >= min(s.min_insync_replicas, 3):
        return DOCUMENTED
    if n == 0 or s.elr is True:
        return TOO_FEW
    return DOCUMENTED  # without ELR, and no ISR to rule out the last replica standing


@settings(max_examples=200, deadline=None)
@given(run_settings(), faults(), lost_writes())
def test_each_lost_write_is_judged_as_the_rule_says(s, fs, w):
    judged = judge_writes(Judge(s, fs, None, list(NODES)), w, TOPIC)
    got = {v: f.kind for f in judged.findings for v in f.data["values"]}
    want = {
        int(w.value[i]): k
        for i in range(len(w))
        if (k := expected(s, fs, float(w.invoked[i]), float(w.until[i]))) is not None
    }
    assert got == want
    assert all((f.tolerated is not None) == (f.kind == DOCUMENTED) for f in judged.findings)
    assert sum(judged.counts.values()) + sum(judged.unjudged.values()) == len(w)


# -- every replica's final log ------------------------------------------------------------------


@st.composite
def final_state(draw):
    """Kafka's correct state after the heal: a leader's log, its high watermark, in-sync
    followers holding at least everything below it, out-of-sync ones any prefix (and any tail
    of their own above it), final reads returning a prefix of what was committed."""
    n = draw(st.integers(0, 12))
    leader_log = list(range(100, 100 + n))
    hw = draw(st.integers(0, n))
    isr = {"n1"} | draw(st.frozensets(st.sampled_from(("n2", "n3"))))
    logs = {"n1": leader_log}
    for b in ("n2", "n3"):
        if b in isr:
            logs[b] = leader_log[: draw(st.integers(hw, n))]
        else:
            k = draw(st.integers(0, n))
            logs[b] = leader_log[:k] + draw(st.lists(st.integers(900, 999), max_size=3))
    marks = {b: min(hw, len(logs[b])) for b in sorted(isr) if draw(st.booleans()) or b == "n1"}
    top = draw(st.integers(0, hw))
    return logs, sorted(isr), marks, leader_log[:top]


def _run(logs, isr, marks, read):
    parsed = {b: parse_data_log(dump({0: [B(1, 0, values=tuple(v), txn=False)] if v else []},
                                     topic=TOPIC), b) for b, v in logs.items()}  # fmt: skip
    parts = Partitions(TOPIC)
    parts.states[0] = [State(0, "n1", frozenset(isr), NODES, "metadata/n1.txt:9")]
    reads = FinalReads(
        0,
        np.zeros(len(read), np.int64),
        np.arange(len(read), dtype=np.int64),
        np.array(read, np.int64),
        np.full(len(read), 7, np.int64),
    )
    result = compare_replicas(parsed, {b: {0: h} for b, h in marks.items()}, parts, reads, TOPIC)
    return {
        (f.kind, f.data.get("broker") or tuple(f.data["brokers"]), tuple(f.data["offsets"]))
        for f in result.findings
    }


def reference(logs, isr, marks, read) -> set:
    """The three rules over dicts of offset -> value."""
    held = {b: dict(enumerate(logs[b])) for b in isr}
    top = len(read) - 1
    bound = max([*marks.values(), top + 1])
    out = set()
    union = {o for b in isr for o in held[b] if o < bound}
    for b in isr:
        lacks = sorted(union - held[b].keys())
        if lacks:
            out.add((MISSING, b, tuple(lacks)))
    for i, b in enumerate(isr):
        for c in isr[i + 1 :]:
            d = sorted(o for o in held[b].keys() & held[c].keys()
                       if o < bound and held[b][o] != held[c][o])  # fmt: skip
            if d:
                out.add((DIVERGED, (b, c), tuple(d)))
    served: set[int] = set()
    for b in isr:
        skipped = [o for o, v in sorted(held[b].items())
                   if o < min(bound, top) and v not in read and v not in served]  # fmt: skip
        if skipped:
            served |= {held[b][o] for o in skipped}
            out.add((NOT_SERVED, b, tuple(skipped)))
    return out


@settings(max_examples=150, deadline=None)
@given(final_state())
def test_kafkas_correct_final_states_raise_nothing(state):
    assert _run(*state) == set()


@settings(max_examples=150, deadline=None)
@given(final_state(), st.data())
def test_broken_final_states_are_found_as_the_rules_say(state, draw):
    logs, isr, marks, read = state
    followers = [b for b in isr if b != "n1"]
    hw = marks["n1"]
    assume(followers and hw > 0)
    b = draw.draw(st.sampled_from(followers))
    o = draw.draw(st.integers(0, hw - 1))
    if draw.draw(st.booleans()):
        logs = {**logs, b: logs[b][:o]}  # lost its committed records from offset o on
    else:
        logs = {**logs, b: [*logs[b][:o], 555, *logs[b][o + 1 :]]}  # another record at o
    found = _run(logs, isr, marks, read)
    assert found == reference(logs, isr, marks, read)
    assert found


# -- records polled and then gone (polled.py) ---------------------------------------------------


@st.composite
def polled_run(draw):
    """Kafka's correct state for records polled during a run without a power loss: per key, a
    leader's log, a high watermark, followers holding any prefix; polls given records below the
    high watermark (any of them, any number of times); the final reads a prefix of it."""
    keys = draw(st.integers(1, 3))
    logs: dict[str, dict[int, list[int]]] = {b: {} for b in NODES}
    polled: list[tuple[int, int, int]] = []  # (key, offset, value)
    final: list[tuple[int, int, int]] = []
    for k in range(keys):
        n = draw(st.integers(0, 8))
        leader = list(range(1000 * (k + 1), 1000 * (k + 1) + n))
        hw = draw(st.integers(0, n))
        logs["n1"][k] = leader
        for b in ("n2", "n3"):
            logs[b][k] = leader[: draw(st.integers(0, n))]
        if hw:
            for o in draw(st.lists(st.integers(0, hw - 1), max_size=10)):
                polled.append((k, o, leader[o]))
        final += [(k, o, leader[o]) for o in range(draw(st.integers(0, hw)))]
    return logs, polled, final


def _polled_then_gone(logs, polled, final):
    parsed = {
        b: parse_data_log(dump({k: [B(1, 0, values=tuple(v), txn=False)] if v else []
                                for k, v in per_key.items()}, topic=TOPIC), b)
        for b, per_key in logs.items()
    }  # fmt: skip

    def arrays(rows):
        cols = list(zip(*rows, strict=True)) if rows else [(), (), ()]
        return [np.array(c, np.int64) for c in cols]

    key, offset, value = arrays(polled)
    got = Polled(key, offset, value, np.arange(len(polled), dtype=np.int64) + 100)
    fk, fo, fv = arrays(final)
    reads = FinalReads(0, fk, fo, fv, np.full(len(final), 7, np.int64))
    sent = np.unique(np.concatenate([value, fv, np.arange(1000, 4000, dtype=np.int64)]))
    found = polled_then_gone(got, held_by_key(parsed), reads, sent, unclean=False)
    return {(f.key, tuple(sorted(f.data["values"]))) for f in found}


@settings(max_examples=150, deadline=None)
@given(polled_run())
def test_records_polled_in_a_correct_run_are_all_found_again(run):
    assert _polled_then_gone(*run) == set()


@settings(max_examples=150, deadline=None)
@given(polled_run(), st.data())
def test_polled_records_every_final_log_and_read_lost_are_each_found(run, draw):
    logs, polled, final = run
    assume(polled)
    lost = set(draw.draw(st.lists(st.sampled_from(polled), min_size=1, max_size=3)))
    gone = {v for _, _, v in lost}
    logs = {b: {k: [v for v in vs if v not in gone] for k, vs in per_key.items()}
            for b, per_key in logs.items()}  # fmt: skip
    final = [r for r in final if r[2] not in gone]
    expected: dict[int, set[int]] = {}
    for k, _, v in lost:
        expected.setdefault(k, set()).add(v)
    assert _polled_then_gone(logs, polled, final) == {
        (k, tuple(sorted(vs))) for k, vs in expected.items()
    }


@st.composite
def zk_final_state(draw):
    """Kafka's correct state in ZooKeeper mode, as the checkpoints show it: a leader's log and
    its high watermark; each follower a prefix of it (and, out of sync, a tail of its own),
    its checkpoint at most the leader's and at most what it shares with the leader."""
    n = draw(st.integers(0, 12))
    leader_log = list(range(100, 100 + n))
    hw = draw(st.integers(0, n))
    logs = {"n1": leader_log}
    marks = {"n1": hw}
    for b in ("n2", "n3"):
        k = draw(st.integers(0, n))
        logs[b] = leader_log[:k] + draw(st.lists(st.integers(900, 999), max_size=3))
        marks[b] = draw(st.integers(0, min(hw, k)))
    top = draw(st.integers(0, hw))
    return logs, marks, leader_log[:top]


@settings(max_examples=150, deadline=None)
@given(zk_final_state())
def test_kafkas_correct_zk_final_states_raise_nothing(state):
    logs, marks, read = state
    parsed = {b: parse_data_log(dump({0: [B(1, 0, values=tuple(v), txn=False)] if v else []},
                                     topic=TOPIC), b) for b, v in logs.items()}  # fmt: skip
    reads = FinalReads(
        0,
        np.zeros(len(read), np.int64),
        np.arange(len(read), dtype=np.int64),
        np.array(read, np.int64),
        np.full(len(read), 7, np.int64),
    )
    result = compare_own_bounds(parsed, {b: {0: h} for b, h in marks.items()}, reads, TOPIC)
    assert result.findings == []
