"""`read-from-other-partition` (checkers/families/queue/rules/reads.py): a value sent to one key and
read from another is named as such in every engine, and is no `garbage-read`; a value sent nowhere
still is, and so is every such read in Jepsen's histories (values unique per key only)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.queue.check import check_queue_table
from checkers.families.queue.per_key import ReferenceEngine
from checkers.families.queue.source import ElementSource
from checkers.families.queue.vector import LocalEngine
from history.columnar import elements, to_table
from history.format import CONSUMER_AFTER_ABORT, JEPSEN
from tests.unit.checkers.histories import H
from tests.unit.checkers.model import INJECTIONS, KEYS, action_lists, run_model


def history(**header):
    """Value 10 acknowledged on key 1 at offset 0; a poll of key 2 returns it at offset 5, and
    value 99, which nobody sent, at offset 6."""
    return (
        H(**header)
        .send(0, 1, 10, 0)
        .send(0, 2, 20, 4, "fail")
        .poll(3, {1: [(0, 10)], 2: [(5, 10), (6, 99)]})
    )


@pytest.mark.parametrize("reference", [True, False])
def test_a_value_read_from_another_key_is_named_with_its_send(reference):
    found = check_queue_table(to_table(history().history()), reference=reference).findings
    kinds = sorted(f.kind for f in found)
    assert kinds == ["garbage-read", "read-from-other-partition"]
    [f] = [f for f in found if f.kind == "read-from-other-partition"]
    assert f.key == 2 and f.ops == (1, 5)
    assert f.explanation == (
        "op 5 polled value 10 from key 2 (partition 2) at offset 5, but value 10 was sent to key "
        "1 (partition 1), acknowledged at offset 0 (op 1, ok at 0.200 s), and no operation sent "
        "it to key 2: a record of partition 1 was returned by a fetch of partition 2. Every "
        "value is sent once in the run, so that send is the record read"
    )
    assert f.data == {
        "value": 10, "offset": 5, "sent_key": 1, "sent_offset": 0, "writer": 1, "reader": 5,
    }  # fmt: skip
    assert f.tolerated is None and not f.unknown
    [g] = [f for f in found if f.kind == "garbage-read"]
    assert g.data["value"] == 99  # sent nowhere: still garbage


def test_a_failed_send_read_from_another_key_says_so():
    h = H().send(0, 1, 10, None, "fail").poll(3, {2: [(0, 10)]})
    [f] = check_queue_table(to_table(h.history())).findings
    assert f.kind == "read-from-other-partition"
    assert "sent to key 1 (partition 1), in op 1, which failed" in f.explanation


def test_jepsen_histories_keep_the_garbage_read():
    table = to_table(history(**{CONSUMER_AFTER_ABORT: JEPSEN}).history())
    for reference in (True, False):
        found = check_queue_table(table, reference=reference).findings
        assert sorted(f.kind for f in found) == ["garbage-read", "garbage-read"]


@settings(max_examples=60)
@given(action_lists, st.sampled_from(KEYS))
def test_the_engines_answer_sends_among_alike(acts, key):
    m = run_model(acts, final_poll=False)
    INJECTIONS["read-from-other-partition"](m, key)
    m.final_poll()
    source = ElementSource(elements=elements(m.table()))
    values = list(range(1000, m.next_value + 1))

    def answer(engine):
        return sorted((k, e.index, e.seq, e.value, e.offset, e.type) for k, e in engine)

    reference = answer(ReferenceEngine(source).sends_among(values))
    assert reference and answer(LocalEngine(source).sends_among(values)) == reference
