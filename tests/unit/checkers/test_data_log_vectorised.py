"""The data-log rules over arrays (checkers/families/data_log/) against the same rules as plain
loops over batches and op rows (data_log_reference.py), on generated data logs and histories:
the same stale batches, repeated records, marker epochs, acknowledged writes and attributions,
so the same findings and notes; and the history's sends read from its columnar file as from its
op rows. The lease rules read op rows as an Arrow table a batch at a time (checkers/scan/
op_stream.py): their findings and notes are those of the rows read as dicts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.data_log.acks import acked_findings, scan_acked
from checkers.families.data_log.attribution import attribute, partition_leaders
from checkers.families.data_log.check import DataLogRead, check_data_logs
from checkers.families.data_log.fencing import stale_batches, stale_findings, stale_values
from checkers.families.data_log.parse import parse_data_log
from checkers.families.data_log.protocol import marker_epochs
from checkers.families.data_log.resent import appended_twice, resent_findings
from checkers.families.data_log.sends import Sends
from checkers.families.metadata_log.check import MetadataLogRead, SendRows, check_read_metadata
from checkers.families.metadata_log.committed import majority_bound
from checkers.families.metadata_log.parse import parse_metadata_log
from checkers.families.metadata_log.rules import committed_records
from checkers.scan.op_stream import OpRows
from history.columnar import SCHEMA, write_parquet
from history.reader import read_history
from tests.unit.checkers import data_log_reference as ref
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


# Generated batches on two brokers and sends acknowledged at generated offsets -----------------
_batch = st.one_of(
    st.builds(
        lambda pid, pe, vs, txn, seq: B(pid, pe, values=tuple(vs), txn=txn, seq=seq),
        st.sampled_from([-1, 7, 8]),
        st.integers(0, 2),
        st.lists(st.integers(1, 14), min_size=1, max_size=3),
        st.booleans(),
        st.integers(-1, 3),
    ),
    st.builds(
        lambda pid, pe, m: B(pid, pe, marker=m),
        st.sampled_from([7, 8]),
        st.integers(0, 2),
        st.sampled_from(["COMMIT", "ABORT"]),
    ),
)
_partition = st.lists(_batch, max_size=6)
# offset acknowledged, outcome, f, process, whether the completion is recorded
_send = st.tuples(
    st.integers(0, 12),
    st.sampled_from(["ok", "ok", "fail", "info"]),
    st.sampled_from(["send", "txn"]),
    st.integers(0, 2),
    st.booleans(),
)
HEADER = {"kchaos_history": 1, "run": "r", "started_wall": 0.0}


def _history(sends: list[tuple], values: list[int]) -> list[dict]:
    """A history as kchaos writes one: each value sent once, each process's ops one after
    another (its last one may never complete)."""
    rows: list[dict] = []
    open_: dict[int, int] = {}  # process -> its invocation still open
    for value, (offset, outcome, f, process, completes) in zip(values, sends, strict=False):
        if process in open_:
            continue  # a process invokes again only once its last op completed
        key = value % 2
        inv = len(rows)
        rows.append({"index": inv, "time": inv, "type": "invoke", "f": f, "process": process,
                     "value": [["send", key, value]], "wall": 100.0 + inv})  # fmt: skip
        if not completes:
            open_[process] = inv
            continue
        ov = [offset, value] if outcome == "ok" else value
        rows.append({"index": len(rows), "time": len(rows), "invoke_index": inv, "type": outcome,
                     "f": f, "process": process, "value": [["send", key, ov]],
                     "wall": 200.0 + len(rows)})  # fmt: skip
    return rows


_histories = st.tuples(
    st.lists(_send, max_size=12),
    st.lists(st.integers(1, 16), unique=True, min_size=12, max_size=12),
)


def _reference(read: DataLogRead, rows: list[dict]) -> tuple[list, list]:
    """The data-log checks composed of the reference rules, worded as the checker words them."""
    logs_ = read.logs
    sends = Sends.from_rows(rows)
    stale = ref.stale_batches(logs_)
    twice = ref.appended_twice(logs_)
    op_of_value = sends.ops_of(stale_values(stale) | {v for _, v, _ in twice})
    findings = stale_findings(stale, op_of_value) + resent_findings(twice, op_of_value)
    found, notes = acked_findings(ref.scan_acked(logs_, rows), sends)
    return findings + found, notes


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.integers(0, 1), _partition, max_size=2),
    st.dictionaries(st.integers(0, 1), _partition, max_size=2),
    _histories,
)
def test_the_rules_over_arrays_are_the_reference_loops(n1, n2, history):
    rows = _history(*history)
    read = DataLogRead(logs(n1=n1, n2=n2))
    sends = Sends.from_rows(rows)

    def cites(stale):
        return [(s.cite(), p.cite(), [c.cite() for c in cs]) for s, p, cs in stale]

    assert cites(stale_batches(read.logs)) == cites(ref.stale_batches(read.logs))
    twice = [
        (k, v, [(c.offset, c.batch.cite()) for c in cs]) for k, v, cs in appended_twice(read.logs)
    ]
    assert twice == [
        (k, v, [(c.offset, c.batch.cite()) for c in cs])
        for k, v, cs in ref.appended_twice(read.logs)
    ]
    assert marker_epochs(read.logs) == ref.marker_epochs(read.logs)
    scan, expected = scan_acked(read.logs, sends), ref.scan_acked(read.logs, rows)
    assert scan.moved == expected.moved
    assert [(s.op.index, s.key, s.offset, s.value, s.held) for s in scan.suspects] == [
        (s.op.index, s.key, s.offset, s.value, s.held) for s in expected.suspects
    ]
    result = check_data_logs(read, rows)
    findings, notes = _reference(read, rows)
    assert result.findings == findings and notes == [
        n for n in result.notes if "acknowledged values held" in n
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(0, 1), _partition, max_size=2),
    _histories,
)
def test_sends_read_from_the_columnar_history_are_those_of_its_op_rows(
    tmp_path_factory, n1, history
):
    rows = _history(*history)
    path = tmp_path_factory.mktemp("h") / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [HEADER, *rows]))
    parquet = write_parquet(read_history(path), path.with_suffix(".parquet"))
    from_file, from_rows = Sends.from_parquet(parquet), Sends.from_rows(rows)
    assert _acked(from_file) == _acked(from_rows)
    for v in history[1]:
        assert from_file.op_of(v) == from_rows.op_of(v)
    read = DataLogRead(logs(n1=n1, n2=n1))
    a, b = check_data_logs(read, from_file), check_data_logs(read, from_rows)
    assert a.findings == b.findings and a.notes == b.notes


def _acked(s: Sends) -> list[tuple[int, ...]]:
    cols = (a[s.acked].tolist() for a in (s.op, s.key, s.offset, s.value))
    return sorted(zip(*cols, strict=True))


def test_a_finding_names_the_same_ops_as_the_reference():
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
    new = check_data_logs(read, rows)
    assert sorted(f.kind for f in new.findings) == [
        "acked-offset-holds-other-write",
        "fenced-producer-write",
    ]
    assert [f.ops for f in new.findings] == [(8, 12), (21, 11)]
    findings, _ = _reference(read, rows)
    assert new.findings == findings


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
def test_metadata_logs_from_a_table_are_the_rows_as_dicts(
    tmp_path_factory, sends, n2, n3, corroborated
):
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
    # Read from a columnar file only for the fence's window (SendRows), a row group at a time.
    parquet = tmp_path_factory.mktemp("h") / "history.parquet"
    op = pa.DictionaryArray.from_arrays(pa.array([0] * len(rows), pa.int32()), ["op"])
    pq.write_table(table.add_column(0, "row", op), parquet, row_group_size=3)
    # With the sends' element rows as arrays, as the registry gives them.
    lazy = SendRows(parquet, any_ok=any(r["type"] == "ok" for r in rows))
    lazy = check_read_metadata(read, CLUSTER, lazy, *args, None, Sends.from_rows(rows))
    assert lazy.findings == old.findings and lazy.notes == old.notes
    committed = list(committed_records(meta, majority_bound(meta, 3).last))
    leaders = partition_leaders(committed, "t")
    for keep in (None, {1, 3}):
        assert attribute(rows, data, leaders, keep) == ref.attribute(rows, data, leaders, keep)


def test_attribution_keeps_only_what_it_is_asked_to_but_counts_every_op():
    h = [*healthy(), (2, FENCE), (2, rec("NO_OP_RECORD"))]
    meta = {n: parse_metadata_log(metalogs.dump(h), n) for n in ("n1", "n2")}
    committed = list(committed_records(meta, majority_bound(meta, 3).last))
    data = logs(n2={0: [B(9, 0, values=(5,)), B(9, 0, values=(6,)), B(9, 0, values=(7,))]})
    sends = [
        {"index": i, "type": "ok", "f": "send", "value": [["send", 0, [i, v]]]}
        for i, v in enumerate((5, 6, 9))
    ]
    leaders = partition_leaders(committed, "t")
    every = attribute(sends, data, leaders)
    some = attribute(sends, data, leaders, keep={1})
    assert every.n_placed == len(every.placed) == some.n_placed == 2
    assert some.placed == {1: every.placed[1]} and some.unplaced == every.unplaced == [2]
    assert every == ref.attribute(sends, data, leaders) and some == ref.attribute(
        sends, data, leaders, {1}
    )


def test_a_log_whose_batches_are_out_of_order_is_searched_batch_by_batch():
    """No dump prints one, but a text may: batches of a partition not ascending (offsets 5,
    then 0..1). The lookups fall back to a scan and agree with the reference."""
    text = dump({0: [B(7, 0, values=(50,)), B(7, 0, values=(60, 61))]})
    text = text.replace("baseOffset: 0 lastOffset: 0", "baseOffset: 5 lastOffset: 5")
    text = text.replace("| offset: 0 ", "| offset: 5 ")
    text = text.replace("baseOffset: 1 lastOffset: 2", "baseOffset: 0 lastOffset: 1")
    text = text.replace("| offset: 1 ", "| offset: 0 ").replace("| offset: 2 ", "| offset: 1 ")
    log = parse_data_log(text, "n1")
    assert [(b.base, b.last) for b in log.partitions[0]] == [(5, 5), (0, 1)]
    assert log.batch_at(0, 5) is log.partitions[0][0] and log.batch_at(0, 1) is log.partitions[0][1]
    rows = [
        {"index": 1, "invoke_index": 0, "type": "ok", "f": "send", "process": 0,
         "value": [["send", 0, [o, v]]]}
        for o, v in ((5, 50), (0, 61), (1, 70), (9, 1))
    ]  # fmt: skip
    read = DataLogRead({"n1": log})
    scan, expected = scan_acked(read.logs, Sends.from_rows(rows)), ref.scan_acked(read.logs, rows)
    assert (
        [(s.offset, s.value) for s in scan.suspects]
        == [(s.offset, s.value) for s in expected.suspects]
        == [(1, 70)]
    )
    assert scan.moved == expected.moved
    assert "value 61: acknowledged at key 0 offset 0" in scan.moved[0]
