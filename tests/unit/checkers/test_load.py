"""Reading a history part by part (checkers.scan.load) must give exactly the arrays, and so the
findings, that one read of the whole table gives: however the rows are cut into row groups,
and whatever order they are stored in."""

import itertools
from dataclasses import fields

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.cycles import OpInfo, op_infos
from checkers.families.queue.arrays import ElemArrays, ElemArraysBuilder, _ints
from checkers.scan.op_arrays import OpArraysBuilder
from history.columnar import ELEMENT_CHECK_COLUMNS, QUEUE_OP_COLUMNS, elements, op_rows
from tests.unit.checkers.model import INJECTIONS, action_lists, run_model


def _parts(table: pa.Table, cuts: list[int]) -> list[pa.Table]:
    bounds = sorted({0, table.num_rows, *(c % (table.num_rows + 1) for c in cuts)})
    return [table.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)]


def _decoded(a: ElemArrays) -> dict[str, list]:
    """Every column as plain values (codes through their names, which may be numbered in
    another order)."""
    out = {}
    for f in fields(a):
        x = getattr(a, f.name)
        if isinstance(x, np.ndarray):
            out[f.name] = x.tolist()
    for codes, names in (("typ", a.type_names), ("kind", a.kind_names), ("proc", a.proc_names)):
        out[codes] = [names[c] for c in getattr(a, codes).tolist()]
    return out


def _built(table: pa.Table, cuts: list[int]) -> ElemArrays:
    build = ElemArraysBuilder(_ints(table.column("key"))[0])
    for part in _parts(table, cuts):
        build.add(part)
    return build.finish()


def _sorted_rows(table: pa.Table) -> ElemArrays:
    """The expectation: every row, sorted by (key, index, seq), from one part."""
    order = np.lexsort(
        [_ints(table.column(c))[0] for c in ("seq", "index", "key")]
    )  # last is primary
    return _built(table.take(pa.array(order)), [])


@settings(max_examples=150)
@given(action_lists, st.lists(st.integers(0, 10_000), max_size=6), st.randoms())
def test_elements_in_parts_and_in_any_order_are_sorted_alike(acts, cuts, rnd):
    table = elements(run_model(acts).table()).select(ELEMENT_CHECK_COLUMNS)
    want = _decoded(_sorted_rows(table))
    assert _decoded(_built(table, cuts)) == want
    shuffled = list(range(table.num_rows))
    rnd.shuffle(shuffled)
    assert _decoded(_built(table.take(pa.array(shuffled, pa.int64())), cuts)) == want


def test_a_part_beyond_the_keys_is_refused():
    table = elements(run_model([("send", 0, 1, "ok")]).table()).select(ELEMENT_CHECK_COLUMNS)
    build = ElemArraysBuilder(np.zeros(0, dtype=np.int64))
    with pytest.raises(ValueError, match="keys known"):
        build.add(table)


@st.composite
def op_tables(draw):
    """Queue op rows: invocations, their completions (some info, some never), some
    completions naming an invocation that is absent, optionally shuffled."""
    n = draw(st.integers(0, 30))
    rows, index, pending = [], 0, []
    for _ in range(n):
        index += draw(st.integers(1, 3))  # other ops in between
        if pending and draw(st.booleans()):
            inv_index, proc, t = pending.pop(draw(st.integers(0, len(pending) - 1)))
            typ = draw(st.sampled_from(["ok", "fail", "info"]))
            rows.append((index, inv_index, typ, proc, t + draw(st.integers(0, 50))))
        elif draw(st.integers(0, 9)) == 0:  # its invocation is not in the history
            rows.append((index, index - 1, "ok", "7", index * 10))
        else:
            proc = str(draw(st.integers(0, 3)))
            rows.append((index, None, "invoke", proc, index * 10))
            pending.append((index, proc, index * 10))
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    return pa.table(
        {c: [r[i] for r in rows] for i, c in enumerate(QUEUE_OP_COLUMNS)},
        schema=pa.schema(
            [
                ("index", pa.int64()),
                ("invoke_index", pa.int64()),
                ("type", pa.string()),
                ("process", pa.string()),
                ("time", pa.int64()),
            ]
        ),
    )


def _expected_ops(table: pa.Table) -> list[OpInfo]:
    """The ops the cycle search sees, by their definition: each completion with its
    invocation's time (the earliest time of the history when that invocation is absent: it
    may have been invoked any time before), and each invocation nothing completed, as info."""
    rows = table.to_pylist()
    invoked = {r["index"]: r["time"] for r in rows if r["type"] == "invoke"}
    named = {r["invoke_index"] for r in rows if r["type"] != "invoke"}
    earliest = min((r["time"] for r in rows), default=0)
    out = [
        OpInfo(r["index"], r["process"], r["type"], invoked.get(r["invoke_index"], earliest),
               None if r["type"] == "info" else r["time"])
        if r["type"] != "invoke"
        else OpInfo(r["index"], r["process"], "info", r["time"], None)
        for r in rows
        if r["type"] != "invoke" or r["index"] not in named
    ]  # fmt: skip
    return sorted(out, key=lambda o: o.index)


@settings(max_examples=300)
@given(op_tables(), st.lists(st.integers(0, 100), max_size=4))
def test_ops_in_parts_are_the_ops_by_definition(table, cuts):
    build = OpArraysBuilder(3)  # too small on purpose: the columns must grow
    for part in _parts(table, cuts):
        build.add(part)
    ops = build.finish()
    assert ops.infos(np.arange(len(ops))) == _expected_ops(table)


def test_ops_agree_with_the_object_path_on_a_model_history():
    table = op_rows(run_model([("send", 0, 1, "ok"), ("poll", 1, None)] * 5).table())
    table = table.select(QUEUE_OP_COLUMNS).filter(
        pa.compute.is_in(table.column("f").cast(pa.string()), pa.array(["send", "poll"]))
    )
    build = OpArraysBuilder(table.num_rows)
    build.add(table)
    ops = build.finish()
    assert ops.infos(np.arange(len(ops))) == op_infos(table.to_pydict())


def test_findings_do_not_depend_on_row_groups(tmp_path):
    """The whole check, on one history stored in one row group and in row groups of 7 rows."""
    m = run_model([("send", 0, k, "ok") for k in (0, 1, 2)] * 3, final_poll=False)
    INJECTIONS["lost-write"](m, 1)
    m.final_poll()
    table = m.table()
    verdicts = []
    for size in (1 << 20, 7):
        d = tmp_path / str(size)
        d.mkdir()
        pq.write_table(table, d / "history.parquet", row_group_size=size)
        verdicts.append(check(d / "history.parquet", engine="local", write=False))
    one, many = verdicts
    assert one.status == "invalid"
    assert [f.to_dict() for f in many.findings] == [f.to_dict() for f in one.findings]
    assert op_rows(table).num_rows > 7  # several row groups of op rows, too
