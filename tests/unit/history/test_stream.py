"""The streamed JSONL-to-Parquet conversion (history/stream.py) against the whole read it
replaces (reader.parse_history, then columnar.to_table): the same rows in the same order, the
same header, the same notes and the same one-line errors, whatever the chunk, block and
row-group sizes; and the same findings when checked."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from history.columnar import (
    ELEM_ROW,
    HEADER_METADATA,
    OP_ROW,
    _only_kind,
    read_table,
    to_table,
    write_parquet,
)
from history.errors import HistoryError
from history.format import INVOKE, JSONL_NAME, is_client
from history.reader import parse_history, read_history
from history.stream import convert, scan, summary_of
from tests.unit.checkers import model, pipelined
from tests.unit.history.test_fuzz import json_values
from tests.unit.history.test_merge import main_bytes, run_merge, side_line, split_history

sizes = st.fixed_dictionaries(
    {
        "chunk_lines": st.sampled_from([1, 2, 3, 7, 1 << 16]),
        "row_group_rows": st.sampled_from([1, 2, 5, 1 << 20]),
        "block_bytes": st.sampled_from([1, 3, 64, 1 << 22]),
    }
)


@contextmanager
def _dir():
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def _model(acts) -> bytes:
    return model.run_model(acts).h.jsonl()


def _pipelined(acts, report: bool, final: bool) -> bytes:
    m = pipelined.run_pipelined(acts, report)
    if final:
        m.final_poll()
    return m.h.jsonl()


def _jvm(split) -> bytes:
    main, sides = split
    merged, _ = run_merge(
        main_bytes(main),
        {f"slot{i}.jsonl": b"".join(map(side_line, s)) for i, s in enumerate(sides)},
    )
    return merged


histories = st.one_of(
    st.builds(_model, model.action_lists),
    st.builds(_pipelined, pipelined.action_lists, st.booleans(), st.booleans()),
    st.builds(_jvm, split_history()),
)


def _old(data: bytes, path: Path):
    """(table, notes, counts) of the whole read, or its error's text."""
    try:
        history = parse_history(data, path)
        table = to_table(history)
    except HistoryError as e:
        return str(e)
    counts = Counter(
        op["type"] for op in history.ops if op["type"] != INVOKE and is_client(op["process"])
    )
    return table, history.notes(), dict(counts)


def _same(data: bytes, sizes: dict[str, int]) -> None:
    with _dir() as d:
        jsonl = d / JSONL_NAME
        jsonl.write_bytes(data)
        want = _old(data, jsonl)
        out = d / "history.parquet"
        try:
            summary = convert(jsonl, out, **sizes)
        except HistoryError as e:
            assert str(e) == want, "an error the whole read does not raise"
            assert "\n" not in str(e)
            assert not out.exists() and not list(d.glob(".*tmp"))  # nothing left behind
            return
        assert not isinstance(want, str), f"the whole read refuses it: {want}"
        table, notes, counts = want
        got = read_table(out)
        assert got.to_pylist() == table.to_pylist()
        assert got.schema == table.schema
        assert got.schema.metadata[HEADER_METADATA] == table.schema.metadata[HEADER_METADATA]
        assert summary.notes() == notes and summary.counts == counts
        assert summary_of(out) == summary and summary.describes(jsonl)
        # Op rows and element rows never share a row group: the statistics say which.
        meta = pq.read_metadata(out)
        kinds = [_only_kind(meta.row_group(i)) for i in range(meta.num_row_groups)]
        if table.num_rows:
            assert all(k in (OP_ROW, ELEM_ROW) for k in kinds)
            assert kinds == sorted(kinds, key=[OP_ROW, ELEM_ROW].index)
        assert all(meta.row_group(i).num_rows <= sizes["row_group_rows"] for i in range(len(kinds)))
        # scan: the same summary, nothing written.
        assert scan(jsonl) == summary


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, sizes)
def test_the_streamed_parquet_is_the_whole_reads_table(data, sizes):
    _same(data, sizes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.integers(0, 100_000), sizes)
def test_a_truncated_history_reads_or_fails_the_same(data, cut, sizes):
    """Any cut: a torn last line, a torn header, an empty file, open invocations."""
    _same(data[: cut % (len(data) + 1)], sizes)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.data(), sizes)
def test_a_mangled_history_reads_or_fails_the_same(data, draw, sizes):
    """One field of one line replaced by any JSON, or a line by any bytes."""
    lines = data.split(b"\n")
    i = draw.draw(st.integers(0, max(0, len(lines) - 2)), label="line")
    if draw.draw(st.booleans(), label="bytes"):
        lines[i] = draw.draw(st.binary(max_size=12), label="new line")
    else:
        try:
            op = json.loads(lines[i])
        except ValueError:
            return
        fields = [*op.keys(), "value", "rebalance", "commit", "foreign", "producer"]
        field = draw.draw(st.sampled_from(fields), label="field")
        op[field] = draw.draw(json_values | st.integers(-2, 10), label="new value")
        lines[i] = json.dumps(op).encode()
    _same(b"\n".join(lines), sizes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.booleans())
def test_checking_the_streamed_parquet_finds_the_same(data, streamed):
    """The check of either file, with tiny row groups, and with the checkers' own streaming
    (checkers/scan/load.py STREAM_ABOVE) on or off, gives the same findings and notes."""
    from checkers.api import check
    from checkers.scan import load

    with _dir() as d, mock.patch.object(load, "STREAM_ABOVE", 0 if streamed else load.STREAM_ABOVE):
        jsonl = d / JSONL_NAME
        jsonl.write_bytes(data)
        new = d / "new" / "history.parquet"
        new.parent.mkdir()
        try:
            old = write_parquet(read_history(jsonl), d / "old.parquet")
        except HistoryError as e:  # the JVM shape's main stream polls with no value
            with pytest.raises(HistoryError, match=re.escape(str(e))):
                convert(jsonl, new, chunk_lines=3, row_group_rows=4)
            return
        convert(jsonl, new, chunk_lines=3, row_group_rows=4)
        a, b = check(old, write=False), check(new, write=False)
        assert (a.status, a.findings) == (b.status, b.findings)


def _write(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / JSONL_NAME
    path.write_bytes(b"".join(lines))
    return path


HEADER = json.dumps({"kchaos_history": 1, "run": "r", "started_wall": 0.0}).encode() + b"\n"


def _op(index: int, type_: str, process: int = 0, value=None, f: str = "send") -> bytes:
    value = [["send", 1, 10]] if value is None else value
    op = {"index": index, "type": type_, "f": f, "process": process, "time": index, "value": value}
    return json.dumps(op).encode() + b"\n"


@pytest.mark.parametrize(
    "lines, says",
    [
        ([HEADER, _op(0, "invoke"), _op(1, "ok")[:-5]], None),  # torn last line: a note
        ([HEADER, b"{not json\n", _op(1, "ok")], ":2: not JSON"),
        ([HEADER, _op(0, "invoke"), _op(1, "ok"), _op(2, "ok")], ":4: ok of process 0 without"),
        ([HEADER[:-10]], ":1: the header line is torn"),
        ([], ": empty file: no header line"),
        ([HEADER, _op(0, "invoke"), _op(1, "ok", value=[["send", "x", 1]])], ":3: send value: key"),
        ([HEADER, _op(0, "invoke", value=[["poll", 3]])], ":2: send value: poll micro-op"),
        # The bad JSON is met after the bad value, but the whole read checks every line first.
        ([HEADER, _op(0, "invoke"), _op(1, "ok", value=[["bogus"]]), b"]\n"], ":4: not JSON"),
        # An open invocation's bad value comes before a later completion's, as to_table meets them.
        (
            [HEADER, _op(0, "invoke", 0, [["bad"]]), _op(1, "invoke", 1), _op(2, "ok", 1, [[1]])],
            ":2: send value",
        ),
    ],
)
def test_bad_input_gives_the_whole_reads_one_line(tmp_path, lines, says):
    path = _write(tmp_path, lines)
    want = _old(path.read_bytes(), path)
    out = tmp_path / "history.parquet"
    out.write_bytes(b"the previous copy")
    if says is None:
        summary = convert(path, out, chunk_lines=1, row_group_rows=1, block_bytes=5)
        assert summary.notes() == want[1] and summary.torn_last_line
        assert "last line is torn" in summary.notes()[0]
        return
    assert isinstance(want, str) and says in want
    with pytest.raises(HistoryError) as e:
        convert(path, out, chunk_lines=1, row_group_rows=1, block_bytes=5)
    assert str(e.value) == want
    assert out.read_bytes() == b"the previous copy"  # left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == [JSONL_NAME, "history.parquet"]


def test_a_missing_history_is_one_error(tmp_path):
    with pytest.raises(HistoryError, match="no such history file"):
        convert(tmp_path / JSONL_NAME, tmp_path / "history.parquet")


def test_a_summary_of_a_file_without_one_is_none(tmp_path):
    from tests.unit.checkers.histories import H

    parquet = H().send(0, 1, 10, 0).write(tmp_path)
    assert summary_of(parquet) is None
    assert summary_of(tmp_path / "absent.parquet") is None
