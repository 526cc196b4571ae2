"""fenced-producer-read: hand-written histories of a transactional run with 2 worker slots
(slot 0: processes 0, 2, 4; slot 1: processes 1, 3), each checked by the reference and the
vectorised path (which must agree), and through `check` with the run's plan.json."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.queue.check import check_queue_table
from history.columnar import to_table
from history.format import TXN_ID_PER_SLOT
from tests.unit.checkers.histories import H

SLOTS = 2
READER = 9  # a consumer: never sends, so its slot does not matter
TXN_PLAN = {"workload": "queue", "txn": True, "concurrency": SLOTS,
            "transactional_id": TXN_ID_PER_SLOT}  # fmt: skip


def fenced(h: H, slots: int | None = SLOTS) -> list:
    table = to_table(h.history())
    ref = check_queue_table(table, reference=True, slots=slots)
    fast = check_queue_table(table, slots=slots)
    assert [f.to_dict() for f in fast.findings] == [f.to_dict() for f in ref.findings]
    return [f for f in ref.findings if f.kind == "fenced-producer-read"]


def zombie(writer: int = 0, successor: int = 2, key2: int = 0, above: bool = True) -> H:
    """`writer`'s send of 10 to key 0 times out; `successor` sends 20 to `key2`, acknowledged;
    a final poll reads 10 above (or below) 20."""
    h = H().send(writer, 0, 10, None, "info").send(successor, key2, 20, 0)
    if key2 != 0:
        return h.poll(READER, {0: [(1, 10)], key2: [(0, 20)]})
    return h.poll(READER, {0: [(0, 20), (2, 10)] if above else [(0, 10), (2, 20)]})


def test_a_retired_processs_record_above_its_successors_write_is_found():
    [f] = fenced(zombie())
    assert f.key == 0 and f.ops == (1, 3, 5) and f.tolerated is None and not f.unknown
    assert f.data == {
        "value": 10, "offsets": [2], "writer": 1, "fence": 3, "fence_offset": 0, "slot": 0,
        "rule": f.data["rule"],
    }  # fmt: skip
    assert "KIP-98" in f.data["rule"] and "zombie" in f.explanation
    assert "process 2 took the slot after process 0 retired" in f.explanation


def test_a_zombie_transaction_committed_above_a_successors_transaction_is_found():
    h = (
        H()
        .txn(1, [["send", 0, 10], ["send", 1, 11]], None, "info")
        .txn(3, [["send", 0, 30], ["poll"]], [["send", 0, [0, 30]], ["poll", {}]])
        .poll(READER, {0: [(0, 30), (2, 10)], 1: [(0, 11)]})
        .poll(READER, {0: [(2, 10)]})  # read twice: one finding citing both polls
    )
    [f] = fenced(h)
    assert f.key == 0 and f.ops == (1, 3, 5, 7) and f.data["slot"] == 1


@pytest.mark.parametrize(
    "h, why",
    [
        (zombie(above=False), "the retired process's record is below its successor's write"),
        (zombie(writer=1), "different slots: different transactional ids"),
        (zombie(writer=2, successor=0), "the earlier process wrote the later record"),
        (zombie(writer=0, successor=0), "one process"),
        (zombie(key2=1), "the successor wrote to another partition"),
    ],
)
def test_no_finding(h, why):
    assert fenced(h) == [], why


def test_only_an_acknowledged_offset_of_the_successor_fences():
    # Its send timed out (or failed): no offset the ack vouches for.
    for outcome in ("info", "fail"):
        h = H().send(0, 0, 10, None, "info").send(2, 0, 20, None, outcome)
        assert fenced(h.poll(READER, {0: [(0, 20), (2, 10)]})) == [], outcome
    # Acknowledged at offset 0, but polls show another value there: the ack proves nothing.
    h = H().send(0, 0, 10, None, "info").send(2, 0, 20, 0)
    assert fenced(h.poll(READER, {0: [(0, 21), (2, 10)]})) == []
    # ... or the same value at another offset, above the read.
    h = H().send(0, 0, 10, None, "info").send(2, 0, 20, 0)
    assert fenced(h.poll(READER, {0: [(2, 10), (3, 20)]})) == []


def test_a_read_at_an_offset_holding_two_values_is_not_judged():
    h = H().send(0, 0, 10, None, "info").send(2, 0, 20, 0).send(4, 0, 40, 2)
    h.poll(READER, {0: [(0, 20), (2, 10)]})
    assert fenced(h) == []  # offset 2: 10 and 40, an inconsistent-offsets finding instead


def test_the_lowest_later_write_is_the_fence_cited():
    h = H().send(0, 0, 10, None, "info").send(4, 0, 40, 5).send(2, 0, 20, 1)
    [f] = fenced(h.poll(READER, {0: [(1, 20), (3, 10), (5, 40)]}))
    assert f.data["fence"] == 5 and f.data["fence_offset"] == 1


def test_not_judged_without_slots():
    assert fenced(zombie(), slots=None) == []


def _run(tmp_path, generator):
    zombie().write(tmp_path)
    if generator is not None:
        (tmp_path / "plan.json").write_text(json.dumps({"generator": generator}))
    return tmp_path


@pytest.mark.parametrize("engine", ["local", "reference"])
def test_check_judges_a_transactional_run_by_its_plan(tmp_path, engine):
    v = check(_run(tmp_path, TXN_PLAN), engine=engine, write=False)
    assert v.status == "invalid"
    assert [f.kind for f in v.failures] == ["fenced-producer-read"]
    assert not any("fenced-producer-read" in n for n in v.notes)


@pytest.mark.parametrize(
    "generator, note",
    [
        ({**TXN_PLAN, "txn": False}, None),  # read_uncommitted, no transactional ids
        ({"workload": "queue"}, None),
        (None, "no plan.json"),  # e.g. a Jepsen history
        ({k: v for k, v in TXN_PLAN.items() if k != "transactional_id"}, "one id per process"),
        ({**TXN_PLAN, "concurrency": None}, "concurrency (None)"),
        ({**TXN_PLAN, "concurrency": 0}, "concurrency (0)"),
    ],
)
def test_check_does_not_judge_without_slots(tmp_path, generator, note):
    v = check(_run(tmp_path, generator), write=False)
    assert "fenced-producer-read" not in {f.kind for f in v.findings}
    said = [n for n in v.notes if n.startswith("fenced-producer-read not judged")]
    if note is None:
        assert said == []
    else:
        assert len(said) == 1 and note in said[0], said


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 2), st.sampled_from(["ok", "info", "fail"])),
        max_size=30,
    ),
    st.randoms(use_true_random=False),
)
def test_every_record_above_a_later_slot_mates_ack_is_found(sends, rnd):
    """Records placed in any order (a broken Kafka): both paths find exactly the values that
    the rule's definition names, computed here by brute force."""
    placed: dict[int, list[tuple[int, int, str]]] = {0: [], 1: [], 2: []}  # key -> (v, p, outcome)
    for n, (p, k, outcome) in enumerate(sends):
        placed[k].append((100 + n, p, outcome))
    offset = {}
    for recs in placed.values():
        rnd.shuffle(recs)
        offset.update({v: o for o, (v, _, _) in enumerate(recs)})
    h = H()
    for n, (p, k, outcome) in enumerate(sends):
        v = 100 + n
        h.send(p, k, v, offset[v] if outcome == "ok" else None, outcome)
    h.poll(READER, {k: [(offset[v], v) for v, _, _ in recs] for k, recs in placed.items()})
    expected = {
        (k, v)
        for k, recs in placed.items()
        for v, p, _ in recs
        for v2, p2, outcome in recs
        if outcome == "ok" and p2 > p and p2 % SLOTS == p % SLOTS and offset[v2] < offset[v]
    }
    assert {(f.key, f.data["value"]) for f in fenced(h)} == expected
