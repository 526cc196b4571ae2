"""The consumer-group, foreign-record and unreadable-record op fields (docs/history.md):
checked by the reader, carried into the columnar form's `fields_json`, and absent from older
Parquet files without harm."""

import json

import pyarrow.parquet as pq
import pytest

from history.columnar import (
    FIELDS_COLUMN,
    has_op_fields,
    read_elements,
    read_ops,
    write_parquet,
)
from history.errors import HistoryError
from history.reader import read_history

HEADER = {"kchaos_history": 1, "run": "r", "started_wall": 0.0}
FIELDS = {
    "rebalance": [["assigned", [1, 2], 6], ["revoked", ["2"], 7]],
    "commit": {"1": 5},
    "foreign": [["other", 0, 3, "x"]],
    "unreadable": [[1, 5, "value b'12#4'"], [-1, -1, "error: Local: Bad message format"]],
}


def history_file(tmp_path, completion_extra):
    path = tmp_path / "history.jsonl"
    ops = [
        {"type": "invoke", "f": "txn", "process": 2, "time": 5, "value": [["poll"], ["poll"]]},
        {"type": "ok", "f": "txn", "process": 2, "time": 9, **completion_extra,
         "value": [["poll", {"1": [[3, 7]]}], ["poll", {"1": [[4, 8]], "3": [[0, 9]]}]]},
    ]  # fmt: skip
    lines = [HEADER] + [{"index": i, **o} for i, o in enumerate(ops)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_fields_are_carried_as_one_json_column(tmp_path):
    out = write_parquet(read_history(history_file(tmp_path, FIELDS)), tmp_path / "h.parquet")
    ops = read_ops(out).to_pylist()
    assert ops[0][FIELDS_COLUMN] is None
    assert json.loads(ops[1][FIELDS_COLUMN]) == FIELDS
    assert has_op_fields(out)
    # Keys of the op's rebalance events are exempt from the int-poll rules, as rebalance_log's.
    elems = read_elements(out).to_pylist()
    assert [(e["key"], e["rebalanced"]) for e in elems] == [(1, True), (1, True), (3, False)]


def test_a_history_without_fields_has_none(tmp_path):
    out = write_parquet(read_history(history_file(tmp_path, {})), tmp_path / "h.parquet")
    assert [r[FIELDS_COLUMN] for r in read_ops(out).to_pylist()] == [None, None]
    assert not has_op_fields(out)


def test_a_parquet_file_from_before_the_column_reads_as_one_without_fields(tmp_path):
    out = write_parquet(read_history(history_file(tmp_path, FIELDS)), tmp_path / "h.parquet")
    old = tmp_path / "old.parquet"
    pq.write_table(pq.read_table(out).drop_columns([FIELDS_COLUMN]), old)
    assert not has_op_fields(old)
    assert FIELDS_COLUMN not in read_ops(old).column_names


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"rebalance": {"assigned": [1]}}, "'rebalance'"),
        ({"rebalance": [["moved", [1], 6]]}, "'rebalance'"),
        ({"rebalance": [["assigned", ["x"], 6]]}, "'rebalance'"),
        ({"rebalance": [["assigned", [1], 6.5]]}, "'rebalance'"),
        ({"commit": [[1, 5]]}, "'commit'"),
        ({"commit": {"1": "5"}}, "'commit'"),
        ({"commit_error": 3}, "'commit_error'"),
        ({"foreign": [["other", 0, 3]]}, "'foreign'"),
        ({"foreign": [[1, 0, 3, 4]]}, "'foreign'"),
        ({"unreadable": [[1, 5]]}, "'unreadable'"),
        ({"unreadable": [["1", 5, "value b'x'"]]}, "'unreadable'"),
        ({"unreadable": [[1, 5, 7]]}, "'unreadable'"),
    ],
)
def test_malformed_fields_name_the_line(tmp_path, extra, fragment):
    with pytest.raises(HistoryError, match=fragment) as e:
        read_history(history_file(tmp_path, extra))
    assert ":3:" in str(e.value)


def test_a_parquet_from_before_the_column_is_rebuilt_for_a_history_with_the_fields(tmp_path):
    # A run checked before the columnar form carried the fields left a newer Parquet file
    # without them: trusting it would hide the history's rebalance events from the checks.
    from checkers.core.inputs import RunInputs

    path = history_file(tmp_path, FIELDS)
    parquet = write_parquet(read_history(path), tmp_path / "history.parquet")
    table = pq.read_table(parquet)
    pq.write_table(table.drop_columns([FIELDS_COLUMN]), parquet)
    assert FIELDS_COLUMN not in pq.read_schema(parquet).names
    RunInputs.open(tmp_path)
    assert FIELDS_COLUMN in pq.read_schema(parquet).names
