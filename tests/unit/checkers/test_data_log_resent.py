"""record-appended-twice: a value sent once, held at two offsets of its partition in a final log,
and what the two batches say of how. Cases from a real run's shape, and near misses."""

from __future__ import annotations

from checkers.families.data_log.check import DataLogRead, check_data_logs
from checkers.families.data_log.parse import parse_data_log
from checkers.families.data_log.resent import KIND, appended_twice, resent_findings
from tests.unit.checkers.datalogs import B, dump


def _logs(**parts):
    return {n: parse_data_log(dump(p), n) for n, p in parts.items()}


def _found(logs, op_of_value=None):
    return resent_findings(appended_twice(logs), op_of_value or {})


# Seed 251's shape (3.9.2, librdkafka 2.16.0): offset 2 of producerId 1001 epoch 0, sequence 111,
# then the same record again under epoch 1 with its sequence restarted at 0.
BUMPED = [
    B(1001, 0, values=(1000000947,), seq=109, txn=False),
    B(1001, 0, values=(1000000948,), seq=110, txn=False),
    B(1001, 0, values=(1000000949,), seq=111, txn=False),
    B(0, 0, values=(891,), seq=40, txn=False),
    B(1001, 1, lepoch=1, values=(1000000949, 1000000950), seq=0, txn=False),
]


def test_a_record_resent_under_a_bumped_epoch_names_both_batches_and_the_bump():
    logs = _logs(n1={0: BUMPED}, n2={0: BUMPED})
    (f,) = _found(logs, {1000000949: 8162})
    assert f.kind == KIND and f.key == 0 and f.ops == (8162,)
    assert f.data["offsets"] == [2, 4] and f.data["producer_epochs"] == [0, 1]
    text = f.explanation
    assert "value 1000000949 to key 0, sent once (op 8162)" in text
    assert "offset 2: data/n1.txt:" in text and "sequence 111" in text
    assert "offset 4: data/n1.txt:" in text and "sequence 0" in text
    assert "under producerEpoch 0 and again under 1 with its sequence restarted" in text
    assert "enable.idempotence" in text
    # The copies of every replica are one record appended twice: one finding, the first log's.
    assert all("data/n1.txt" in b for b in f.data["batches"])


def test_the_same_session_twice_and_two_sessions_are_told_apart():
    same = [B(7, 0, values=(5,), seq=3, txn=False), B(7, 0, values=(5,), seq=4, txn=False)]
    (f,) = _found(_logs(n1={1: same}))
    assert "the same producerId 7 and producerEpoch 0 wrote it twice (sequences 3 and 4)" in (
        f.explanation
    )
    two = [B(7, 0, values=(5,), txn=False), B(8, 0, values=(5,), txn=False)]
    (g,) = _found(_logs(n1={1: two}))
    assert "two producer sessions (producerId 7, then 8)" in g.explanation
    assert g.ops == ()  # no op named when the history did not say who sent it


def test_near_misses_are_not_findings():
    # Distinct values; the same value in two partitions (another question); a copy inside a
    # transaction that was aborted (invisible to read_committed readers); a committed one kept.
    distinct = {0: [B(1, 0, values=(1, 2)), B(1, 0, values=(3,))]}
    two_partitions = {0: [B(1, 0, values=(9,))], 1: [B(1, 0, values=(9,))]}
    aborted = {
        0: [
            B(1, 0, values=(4,)),
            B(9, 9, marker="ABORT"),  # another producer's marker: not 1's
            B(1, 0, marker="ABORT"),
            B(1, 1, values=(4,)),
            B(1, 1, marker="COMMIT"),
        ]
    }
    for parts in (distinct, two_partitions, aborted):
        assert _found(_logs(n1=parts)) == []
    committed = {0: [B(1, 0, values=(4,)), B(1, 0, marker="COMMIT"), B(1, 1, values=(4,))]}
    assert [f.data["offsets"] for f in _found(_logs(n1=committed))] == [[0, 2]]


def test_the_data_logs_checker_reports_it_with_the_op_that_sent_the_value():
    rows = [
        {"index": 10, "invoke_index": None, "type": "invoke", "f": "send", "process": 3,
         "value": [["send", 0, 1000000949]]},
        {"index": 11, "invoke_index": 10, "type": "ok", "f": "send", "process": 3,
         "value": [["send", 0, [4, 1000000949]]]},
    ]  # fmt: skip
    result = check_data_logs(DataLogRead(_logs(n1={0: BUMPED})), rows)
    assert [(f.kind, f.ops) for f in result.findings] == [(KIND, (11,))]


def test_a_bump_is_claimed_only_as_far_as_the_batches_show_it():
    # A higher epoch without a lower sequence: the sequences are given, not "restarted".
    kept = [B(7, 0, values=(5,), seq=3, txn=False), B(7, 1, values=(5,), seq=9, txn=False)]
    (f,) = _found(_logs(n1={1: kept}))
    assert "under producerEpoch 0 and again under 1 (sequences 3, 9)" in f.explanation
    assert "restarted" not in f.explanation
    # A lower epoch later is no bump: a fenced producer's write appended again.
    lower = [B(7, 2, values=(5,), txn=False), B(7, 1, values=(5,), txn=False)]
    (g,) = _found(_logs(n1={1: lower}))
    assert "later under the lower 1" in g.explanation and "bumped" not in g.explanation
