"""The send-reading checkers read op rows as an Arrow table a batch at a time: the findings and
notes are those of reading every row as a dict (the path they replaced, kept as the reference),
on generated data logs and histories."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.data_log.check import DataLogRead, check_data_log_ops, check_data_logs
from checkers.families.data_log.parse import parse_data_log
from checkers.families.metadata_log.check import MetadataLogRead, check_read_metadata
from checkers.families.metadata_log.parse import parse_metadata_log
from checkers.scan.op_stream import OpRows
from history.columnar import SCHEMA
from tests.unit.checkers import metalogs
from tests.unit.checkers.datalogs import B, dump
from tests.unit.checkers.metalogs import BASE_MS, CLUSTER, healthy, rec

OP_COLUMNS = [f for f in SCHEMA if f.name != "row"]


def as_table(rows: list[dict]) -> pa.Table:
    """Op rows as history.parquet holds them: the value as JSON text, strings as dictionaries."""
    cols = {f.name: [] for f in OP_COLUMNS}
    for r in rows:
        for f in OP_COLUMNS:
            if f.name == "value_json":
                cols[f.name].append(json.dumps(r.get("value")))
            elif f.name == "value":
                cols[f.name].append(None)
            else:
                v = r.get(f.name)
                text = v is not None and pa.types.is_dictionary(f.type)
                cols[f.name].append(str(v) if text else v)
    arrays = [pa.array(cols[f.name], type=f.type) for f in OP_COLUMNS]
    return pa.Table.from_arrays(arrays, schema=pa.schema(OP_COLUMNS))


def logs(**parts):
    return {n: parse_data_log(dump(p), n) for n, p in parts.items()}


def test_op_rows_are_to_pylist_a_batch_at_a_time():
    rows = [
        {"index": i, "type": "ok", "f": "send", "value": [["send", 0, [i, i]]]} for i in range(7)
    ]
    table = as_table(rows)
    assert list(OpRows(table, batch_rows=3)) == table.to_pylist()
    assert list(OpRows(table, batch_rows=3)) == list(OpRows(table, batch_rows=3))  # again
    assert len(OpRows(table)) == 7 and not OpRows(table.slice(0, 0))


# Data logs: generated batches on two brokers and sends acknowledged at generated offsets ------
_batch = st.one_of(
    st.builds(
        lambda pid, pe, vs: B(pid, pe, values=tuple(vs)),
        st.sampled_from([-1, 7, 8]),
        st.integers(0, 2),
        st.lists(st.integers(1, 12), min_size=1, max_size=3),
    ),
    st.builds(
        lambda pid, pe, m: B(pid, pe, marker=m),
        st.sampled_from([7, 8]),
        st.integers(0, 2),
        st.sampled_from(["COMMIT", "ABORT"]),
    ),
)
_partition = st.lists(_batch, max_size=6)
# value, offset acknowledged (or none), outcome, f, process, whether the completion is recorded
_send = st.tuples(
    st.integers(1, 14),
    st.integers(0, 12),
    st.sampled_from(["ok", "ok", "fail", "info"]),
    st.sampled_from(["send", "txn"]),
    st.integers(0, 2),
    st.booleans(),
)


def _history(sends: list[tuple]) -> list[dict]:
    rows: list[dict] = []
    pending = []
    for value, offset, outcome, f, process, completes in sends:
        key = value % 2
        inv = len(rows)
        rows.append({"index": inv, "type": "invoke", "f": f, "process": process,
                     "value": [["send", key, value]], "wall": 100.0 + inv})  # fmt: skip
        if completes:
            pending.append((inv, key, value, offset, outcome, f, process))
    for inv, key, value, offset, outcome, f, process in pending:
        ov = [offset, value] if outcome == "ok" else value
        rows.append({"index": len(rows), "invoke_index": inv, "type": outcome, "f": f,
                     "process": process, "value": [["send", key, ov]],
                     "wall": 200.0 + len(rows)})  # fmt: skip
    return rows


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.integers(0, 1), _partition, max_size=2),
    st.dictionaries(st.integers(0, 1), _partition, max_size=2),
    st.lists(_send, max_size=12),
)
def test_data_logs_from_a_table_are_the_rows_as_dicts(n1, n2, sends):
    read = DataLogRead(logs(n1=n1, n2=n2))
    table = as_table(_history(sends))
    old = check_data_logs(read, table.to_pylist())  # what RunInputs.op_rows answered
    new = check_data_log_ops(read, table)
    assert new.findings == old.findings and new.notes == old.notes


def test_a_finding_names_the_same_ops_from_a_table():
    # tests/unit/checkers/test_data_log.py's real 4.1.2 case: an ack at an aborted batch's offset
    reused = [
        B(1000, 0, values=(1000060,)),
        B(1000, 0, values=(2000079,)),
        B(1000, 0, marker="ABORT"),
        B(2, 1, values=(1000067,)),
    ]
    stale = [B(7, 1, values=(20,)), B(7, 0, values=(10, 11))]
    read = DataLogRead(logs(n1={5: reused, 2: stale}, n2={5: reused}))
    rows = [
        {"index": 8, "type": "invoke", "f": "txn", "process": 1, "value": [["send", 2, 10]]},
        {"index": 9, "type": "invoke", "f": "txn", "process": 1, "value": [["send", 2, 11]]},
        {"index": 10, "type": "invoke", "f": "txn", "process": 2, "value": [["send", 5, 2000079]]},
        {"index": 11, "type": "fail", "f": "txn", "process": 2, "invoke_index": 10,
         "value": [["send", 5, 2000079]]},
        {"index": 12, "type": "ok", "f": "txn", "process": 1, "invoke_index": 9,
         "value": [["send", 2, [5, 11]]]},
        {"index": 20, "type": "invoke", "f": "send", "process": 2, "value": [["send", 5, 2000113]]},
        {"index": 21, "type": "ok", "f": "send", "process": 2, "invoke_index": 20,
         "value": [["send", 5, [1, 2000113]]]},
    ]  # fmt: skip
    table = as_table(rows)
    old = check_data_logs(read, table.to_pylist())
    new = check_data_log_ops(read, table)
    assert sorted(f.kind for f in new.findings) == [
        "acked-offset-holds-other-write",
        "fenced-producer-write",
    ]
    assert [f.ops for f in new.findings] == [(8, 12), (21, 11)]
    assert new.findings == old.findings and new.notes == old.notes


# Metadata logs: lease violations attributed through the data logs -----------------------------
FENCE = rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=1, brokerEpoch=2, fenced=1)
_lease_send = st.tuples(
    st.sampled_from([-1_000, 4_900, 5_500, 9_000]),  # invoked this long after the fence, ms
    st.sampled_from(["n1", "n2", "n3"]),
    st.integers(0, 2),  # offset acknowledged
    st.sampled_from([5, 6]),  # value
    st.sampled_from(["ok", "ok", "info"]),
    st.booleans(),  # the invocation is recorded (else the completion's invoke_wall is None)
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_lease_send, max_size=8),
    st.lists(st.tuples(st.sampled_from([0, 0, 1]), st.sampled_from([5, 6])), max_size=3),
    st.lists(st.tuples(st.sampled_from([0, 0, 1]), st.sampled_from([5, 6])), max_size=3),
    st.frozensets(st.integers(0, 16)),
)
def test_metadata_logs_from_a_table_are_the_rows_as_dicts(sends, n2, n3, corroborated):
    h = [*healthy(), (2, FENCE), (2, rec("NO_OP_RECORD"))]
    meta = {n: parse_metadata_log(metalogs.dump(h), n) for n in ("n1", "n2")}
    fence_ms = BASE_MS + 100 * (len(h) - 2)
    rows: list[dict] = []
    for after_ms, node, offset, value, outcome, invoked in sends:
        inv = (fence_ms + after_ms) / 1000
        if invoked:
            rows.append({"index": len(rows), "type": "invoke", "f": "send", "node": node,
                         "process": 0, "wall": inv, "value": [["send", 0, value]]})  # fmt: skip
        ov = [offset, value] if outcome == "ok" else value
        rows.append({"index": len(rows), "invoke_index": len(rows) - 1 if invoked else None,
                     "type": outcome, "f": "send", "node": node, "process": 0,
                     "wall": inv + 0.05, "value": [["send", 0, ov]]})  # fmt: skip
    data = logs(
        n2={0: [B(9, 0, lepoch=e, values=(v,)) for e, v in n2]},
        n3={0: [B(9, 0, lepoch=e, values=(v,)) for e, v in n3]},
    )
    read = MetadataLogRead(Path("metadata"), voters=meta)
    table = as_table(rows)
    args = (None, set(corroborated), None, data)
    old = check_read_metadata(read, CLUSTER, table.to_pylist(), *args)
    new = check_read_metadata(read, CLUSTER, table, *args)
    assert new.findings == old.findings and new.notes == old.notes
    assert new.stats == old.stats and new.checked == old.checked


def test_attribution_keeps_only_what_it_is_asked_to_but_counts_every_op():
    from checkers.families.data_log.attribution import attribute, partition_leaders
    from checkers.families.metadata_log.committed import majority_bound
    from checkers.families.metadata_log.rules import committed_records

    h = [*healthy(), (2, FENCE), (2, rec("NO_OP_RECORD"))]
    meta = {n: parse_metadata_log(metalogs.dump(h), n) for n in ("n1", "n2")}
    committed = list(committed_records(meta, majority_bound(meta, 3).last))
    data = logs(n2={0: [B(9, 0, values=(5,)), B(9, 0, values=(6,)), B(9, 0, values=(7,))]})
    sends = [
        {"index": i, "type": "ok", "value": [["send", 0, [i, v]]]} for i, v in enumerate((5, 6, 9))
    ]
    leaders = partition_leaders(committed, "t")
    every = attribute(sends, data, leaders)
    some = attribute(sends, data, leaders, keep=lambda op: op["index"] == 1)
    assert every.n_placed == len(every.placed) == some.n_placed == 2
    assert some.placed == {1: every.placed[1]} and some.unplaced == every.unplaced == [2]
