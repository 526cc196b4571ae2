import json

import pytest

from history.columnar import read_elements, read_ops, to_table, write_parquet
from history.errors import HistoryError
from history.reader import read_history

HEADER = {"kchaos_history": 1, "run": "r", "started_wall": 0.0}


def history_file(tmp_path, ops):
    path = tmp_path / "history.jsonl"
    lines = [HEADER] + [{"index": i, **o} for i, o in enumerate(ops)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_elements_carry_their_operation(tmp_path):
    path = history_file(
        tmp_path,
        [
            {"type": "invoke", "f": "txn", "process": 2, "time": 5,
             "value": [["send", 1, 10], ["poll"]]},
            {"type": "ok", "f": "txn", "process": 2, "time": 9,
             "value": [["send", 1, [4, 10]], ["poll", {"1": [[3, 7], [4, 10]], "2": []}]]},
            {"type": "invoke", "f": "send", "process": 3, "time": 11, "value": [["send", 2, 11]]},
        ],
    )  # fmt: skip
    h = read_history(path)
    out = write_parquet(h, tmp_path / "history.parquet")
    elems = read_elements(out).to_pylist()
    assert [(e["kind"], e["key"], e["offset"], e["value"], e["mop"], e["seq"]) for e in elems] == [
        ("send", 1, 4, 10, 0, 0),
        ("poll", 1, 3, 7, 1, 1),
        ("poll", 1, 4, 10, 1, 2),
        # The never-completed send is an info op: its argument, no offset, no completion time.
        ("send", 2, None, 11, 0, 0),
    ]
    first, last = elems[0], elems[-1]
    assert (first["index"], first["invoke_index"], first["type"], first["process"]) == (
        1, 0, "ok", "2",
    )  # fmt: skip
    assert (first["invoke_time"], first["time"]) == (5, 9)
    assert (last["index"], last["type"], last["time"]) == (2, "info", None)
    ops = read_ops(out)
    assert ops.num_rows == 3
    assert json.loads(ops.column("value_json")[1].as_py())[0] == ["send", 1, [4, 10]]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("nope", "list of micro-operations"),
        ([["append", 1, 2]], "neither"),
        ([["send", 1]], 'not ["send", key, value]'),
        ([["send", "x", 1]], "key 'x'"),
        ([["send", 1, [1, 2, 3]]], "not [offset, value]"),
        ([["poll", {"1": [[1]]}]], "not [offset, value]"),
        ([["poll", {"1": 5}]], "not a list"),
        ([["poll", [1]]], 'is not ["poll"'),
    ],
)
def test_malformed_queue_values_name_the_line(tmp_path, value, fragment):
    path = history_file(
        tmp_path,
        [
            {"type": "invoke", "f": "send", "process": 0, "time": 0, "value": None},
            {"type": "ok", "f": "send", "process": 0, "time": 1, "value": value},
        ],
    )
    with pytest.raises(HistoryError) as e:
        to_table(read_history(path))
    assert e.value.line == 3
    assert fragment in str(e.value)


def test_unreadable_parquet_is_a_history_error(tmp_path):
    bogus = tmp_path / "history.parquet"
    bogus.write_bytes(b"PAR1 not really")
    with pytest.raises(HistoryError, match="not a readable Parquet history"):
        read_elements(bogus)


@pytest.mark.parametrize("row_group_size", [1, 3, 1 << 20])
def test_check_parts_are_the_narrow_columns_of_the_same_rows(tmp_path, row_group_size):
    """Same rows as filtering the whole table, whatever the row groups (mixed groups too)."""
    import pyarrow.parquet as pq

    from history.columnar import (
        ELEMENT_CHECK_COLUMNS,
        QUEUE_OP_COLUMNS,
        check_parts,
        elements,
        op_rows,
    )
    from tests.unit.checkers.histories import H

    h = (
        H()
        .assign(1, [1])
        .send(0, 1, 10, 0)
        .observe("n1")
        .poll(1, {1: [(0, 10)]})
        .nemesis("start-kill", ["n1"])
        .crash(1)
        .send(0, 1, 11, None, "info")
    )
    table = to_table(h.history())
    path = tmp_path / "history.parquet"
    pq.write_table(table, path, row_group_size=row_group_size)
    parts = list(check_parts(path, ["assign", "crash"], ["observer", "nemesis"]))
    assert len(parts) == -(-table.num_rows // row_group_size)  # one part per row group
    got_elements = [r for p in parts for r in p.elements.to_pylist()]
    assert got_elements == elements(table).select(ELEMENT_CHECK_COLUMNS).to_pylist()
    queue = op_rows(table, ["poll", "send", "txn"]).select(QUEUE_OP_COLUMNS)
    assert [r for p in parts for r in p.queue_ops.to_pylist()] == queue.to_pylist()
    wide = op_rows(table, ["assign", "crash"]).to_pylist()
    wide += op_rows(table, processes=["observer", "nemesis"]).to_pylist()
    want = sorted((dict(r, row=None) for r in wide), key=lambda r: r["index"])
    assert [dict(r, row=None) for p in parts for r in p.wide_ops.to_pylist()] == want
    # Fewer element columns asked: the same rows, those columns only, the rest unchanged.
    narrow = ["index", "seq", "value"]
    some = list(check_parts(path, ["assign", "crash"], ["observer", "nemesis"], narrow))
    assert [r for p in some for r in p.elements.to_pylist()] == [
        {c: r[c] for c in narrow} for r in got_elements
    ]
    assert [p.queue_ops.to_pylist() for p in some] == [p.queue_ops.to_pylist() for p in parts]
