"""`read-from-other-topic` (checkers/families/foreign.py): an op whose consumer was handed records
of another topic than the run's."""

from __future__ import annotations

import pyarrow.parquet as pq

from checkers.api import check
from checkers.families.foreign import FOREIGN_FS, foreign_reads
from history.columnar import FIELDS_COLUMN, op_rows, to_table
from tests.unit.checkers.histories import H

OTHER = [["__consumer_offsets", 7, 12, "x"], ["other", 0, 3, 44]]


def rows(h: H):
    return op_rows(to_table(h.history()), list(FOREIGN_FS)).to_pylist()


def test_an_op_handed_another_topics_records_is_found():
    h = H().send(0, 1, 10, 0).poll(2, {1: [(0, 10)]}, foreign=OTHER)
    [f], n = foreign_reads(rows(h))
    assert n == 1
    assert (f.kind, f.key, f.ops) == ("read-from-other-topic", None, (3,))
    assert f.explanation.startswith(
        "op 3 (poll, process 2, ok at 0.400 s) was handed 2 record(s) of another topic than "
        "the run's: '__consumer_offsets' partition 7 offset 12 (value 'x'); 'other' partition "
        "0 offset 3 (value 44)"
    )
    assert f.data["records"] == OTHER


def test_a_failed_transaction_handed_them_is_found_too_and_empty_lists_are_nothing():
    h = H().txn(2, [["poll"]], [["poll", {}]], "fail")
    h.lines[-1]["foreign"] = OTHER[:1]
    h.poll(3, {}, foreign=[])
    found, n = foreign_reads(rows(h))
    assert [f.ops for f in found] == [(1,)] and n == 1


def test_the_registry_reads_them_from_a_stored_history_and_not_from_older_files(tmp_path):
    h = H().send(0, 1, 10, 0).poll(2, {1: [(0, 10)]}, foreign=OTHER)
    path = h.write(tmp_path)
    verdict = check(tmp_path, write=False)
    assert [f.kind for f in verdict.failures] == ["read-from-other-topic"]
    assert verdict.stats["foreign_record_ops"] == 1
    # A Parquet file written before the column existed: checked as before, nothing to say.
    old = tmp_path / "old"
    old.mkdir()
    pq.write_table(pq.read_table(path).drop_columns([FIELDS_COLUMN]), old / "history.parquet")
    verdict = check(old / "history.parquet", write=False)
    assert verdict.status == "valid" and verdict.failures == []
    assert "foreign_record_ops" not in verdict.stats
