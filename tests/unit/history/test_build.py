"""history.parquet built from the recorder's history.jsonl and the JVM's binary side files
(history/build.py) against today's path it replaces (history/merge.py's JSONL merge, then
history/stream.py's conversion): on generated histories split over a main history and side
files (sends, final reads; ties, open invocations, errors, null offsets, torn tails) the same
table row for row, the same row groups, the same header and summary; bad records are one
error naming the file and record; build_run is crash-safe and idempotent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from history.build import build, build_run, built, pending
from history.columnar import _only_kind, read_table
from history.errors import HistoryError
from history.format import JSONL_NAME, JVM_SENDS_DIR, JVM_SENDS_FIELD, PARQUET_NAME
from history.reader import read_history
from history.sidefiles import (
    ELEMENT,
    OP,
    POLLS_TAG,
    SENDS_TAG,
    TYPE_CODES,
    SideWriter,
    highest_process,
    open_side,
    poll_records,
    send_records,
    side_files,
)
from history.stream import convert, summary_of
from tests.unit.history.test_merge import (
    final_poll,
    final_reads,
    main_bytes,
    run_merge,
    send,
    side_line,
    split_history,
)


def send_bytes(op: dict[str, Any], w: SideWriter) -> np.ndarray:
    """A send op's record, as KchaosRecorded.java writes it."""
    r = send_records(1)
    mop = op["value"][0]
    r["time"], r["process"], r["producer"] = op["time"], op["process"], op["producer"]
    r["wall_us"] = round(op["wall"] * 1e6)
    r["key"] = mop[1]
    r["type"] = TYPE_CODES[op["type"]]
    if isinstance(mop[2], list):
        offset, value = mop[2]
        r["offset"] = -1 if offset is None else offset
    else:
        value = mop[2]
    r["value"] = value
    r["node"] = w.string(op.get("node"))
    r["error"] = w.string(op.get("error"))
    return r


def poll_bytes(op: dict[str, Any], w: SideWriter) -> np.ndarray:
    """A poll op's records, as KchaosFinal.java writes them: its elements, then the op."""
    read = op["value"][0][1] if op["type"] == "ok" else {}
    pairs = [(int(k), o, v) for k, rs in read.items() for o, v in rs]
    r = poll_records(len(pairs) + 1)
    for i, (k, o, v) in enumerate(pairs):
        r[i]["kind"], r[i]["a"], r[i]["b"], r[i]["c"] = ELEMENT, k, -1 if o is None else o, v
    r[-1]["kind"], r[-1]["type"] = OP, TYPE_CODES[op["type"]]
    r[-1]["a"], r[-1]["b"], r[-1]["c"] = op["time"], round(op["wall"] * 1e6), op["process"]
    r[-1]["error"] = w.string(op.get("error"))
    return r


def write_side(path: Path, ops: list[dict[str, Any]], cut: int = 0) -> None:
    """The ops as a binary side file, its last `cut` bytes torn off."""
    polls = path.stem == "final"
    w = SideWriter(path, POLLS_TAG if polls else SENDS_TAG)
    for op in ops:
        w.write(poll_bytes(op, w) if polls else send_bytes(op, w))
    w.close()
    if cut:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - cut])


def record_bytes(path: Path, op: dict[str, Any]) -> int:
    """How many bytes `op` takes in a side file of `path`'s kind."""
    polls = path.stem == "final"
    w = SideWriter(path.with_name("scratch" + path.suffix), POLLS_TAG if polls else SENDS_TAG)
    n = (poll_bytes(op, w) if polls else send_bytes(op, w)).nbytes
    w.close()
    return n


def plain(table: pa.Table) -> list[dict[str, Any]]:
    """The table's rows with dictionary columns decoded (their dictionaries' order differs)."""
    cols = {
        name: (col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col)
        for name, col in zip(table.column_names, table.columns, strict=True)
    }
    return pa.table(cols).to_pylist()


def layout(path: Path) -> list[tuple[int, str | None]]:
    meta = pq.ParquetFile(path).metadata
    return [
        (meta.row_group(i).num_rows, _only_kind(meta.row_group(i)))
        for i in range(meta.num_row_groups)
    ]


def both_ways(
    tmp: Path,
    main: bytes,
    sides: dict[str, list[dict[str, Any]]],
    cuts: dict[str, int] | None = None,
    row_group_rows: int = 1 << 20,
) -> tuple[Path, Path, Any]:
    """(today's Parquet, the built one, Built): the same inputs merged as JSONL and converted,
    and built from binary side files."""
    cuts = cuts or {}
    jsonl_sides = {}
    for name, ops in sides.items():
        raw = b"".join(side_line(o) for o in ops)
        if cuts.get(name):  # the last op's line torn: at least its newline gone
            raw = raw[: len(raw) - 1]
        jsonl_sides[name] = raw
    merged, _ = run_merge(main, jsonl_sides)
    old_dir, new_dir = tmp / "old", tmp / "new"
    old_dir.mkdir()
    new_dir.mkdir()
    (old_dir / JSONL_NAME).write_bytes(merged)
    old = old_dir / PARQUET_NAME
    convert(old_dir / JSONL_NAME, old, row_group_rows=row_group_rows)
    (new_dir / JSONL_NAME).write_bytes(main)
    paths = []
    for name, ops in sides.items():
        p = new_dir / name
        write_side(p, ops, cuts.get(name, 0))
        paths.append(p)
    new = new_dir / PARQUET_NAME
    done = build(
        new_dir / JSONL_NAME, [open_side(p) for p in paths], new, row_group_rows=row_group_rows
    )
    return old, new, done


def assert_same(old: Path, new: Path) -> None:
    a, b = read_table(old), read_table(new)
    assert a.schema.metadata == b.schema.metadata  # the header
    assert plain(a) == plain(b)
    assert layout(old) == layout(new)
    sa, sb = summary_of(old), summary_of(new)
    assert sa is not None and sb is not None
    for name in ("header", "ops", "torn_last_line", "incomplete", "counts", "op_fields"):
        assert getattr(sa, name) == getattr(sb, name), name


@st.composite
def jvm_run(draw: Any) -> tuple[list[dict], dict[str, list[dict]]]:
    """A main history, slots' sends and (perhaps) final reads after them, each ops' wall a
    whole number of microseconds (as the JVM writes it)."""
    main, sides = draw(split_history())
    for op in main:  # the main history's client polls, with values the columnar form reads
        if op["f"] == "poll":
            read = {"5": [[len(main), op["time"]]]} if op["type"] == "ok" else None
            op["value"] = [["poll", read]] if read else [["poll"]]
    named = {f"slot{i}.ops": ops for i, ops in enumerate(sides)}
    if draw(st.booleans()):
        end = max((op["time"] for op in [*main, *(o for s in sides for o in s)]), default=0)
        # Ties with the main history's last ops, sometimes.
        named["final.ops"] = draw(final_reads(end - draw(st.integers(0, 3)), 10**6))
    # Null offsets on some ok sends, another node and no node on some.
    for ops in named.values():
        for op in ops:
            if op["f"] == "send" and op["type"] == "ok" and draw(st.integers(0, 5)) == 0:
                op["value"] = [["send", op["value"][0][1], [None, op["value"][0][2][1]]]]
            if op["f"] == "send":
                op["node"] = draw(st.sampled_from(["n1", "n2", None]))
    return main, named


# Each example writes four files and two Parquet histories: the CI profile's 10,000 would take
# minutes.
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(jvm_run(), st.sampled_from([1, 3, 1 << 20]))
def test_the_built_history_is_todays_merged_and_converted_one(tmp_path_factory, run, rows):
    main, sides = run
    old, new, done = both_ways(tmp_path_factory.mktemp("b"), main_bytes(main), sides, None, rows)
    assert_same(old, new)
    assert done.side_ops == sum(map(len, sides.values()))
    # history.jsonl for people, derived from the Parquet file: the merged history's ops.
    merged = read_history(old.parent / JSONL_NAME)
    derived = read_history(new)
    assert derived.header == merged.header
    assert [_shown(op) for op in derived.ops] == [_shown(op) for op in merged.ops]
    assert derived.incomplete == merged.incomplete


def _shown(op: dict[str, Any]) -> dict[str, Any]:
    """An op as a reader takes it: a null wall or node is no wall or node."""
    return {k: v for k, v in op.items() if not (k in ("wall", "node") and v is None)}


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(jvm_run(), st.data())
def test_torn_tails_are_dropped_and_said_as_today(tmp_path_factory, run, data):
    main, sides = run
    sides = {n: ops for n, ops in sides.items() if ops}
    if not sides:
        sides = {"slot0.ops": [send("invoke", 0, 1, 0, 1, 0)]}
    torn = data.draw(st.sampled_from(sorted(sides)))
    tmp = tmp_path_factory.mktemp("t")
    last = record_bytes(tmp / torn, sides[torn][-1])
    cuts = {torn: data.draw(st.integers(1, last - 1))}  # not the whole op: torn
    raw = main_bytes(main)
    if data.draw(st.booleans()):
        raw += b'{"index":99,"type":"ok","f":"obs'  # the recorder's own last line torn
    old, new, done = both_ways(tmp, raw, sides, cuts)
    assert_same(old, new)
    assert done.torn == [torn]
    header = summary_of(new).header  # type: ignore[union-attr]
    assert header[JVM_SENDS_FIELD]["torn"] == [torn]


def test_a_torn_header_or_an_empty_file_has_no_records(tmp_path):
    for name, data, torn in (("slot0.ops", b"", False), ("slot1.ops", b"KCHA", True)):
        (tmp_path / name).write_bytes(data)
        side = open_side(tmp_path / name)
        assert (side.count, side.torn) == (0, torn)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda r: r.__setitem__("type", 7), "slot0.ops:2: type code 7"),
        (lambda r: r.__setitem__("error", 5), "slot0.ops:2: error names string 5"),
        (lambda r: r.__setitem__("node", 9), "slot0.ops:2: node names string 9"),
        (lambda r: r.__setitem__("type", 1), "slot0.ops:2: ok of process 1 without an invocation"),
    ],
)
def test_a_bad_record_names_its_file_and_record(tmp_path, edit, says):
    (tmp_path / JSONL_NAME).write_bytes(main_bytes([]))
    ops = [send("invoke", 0, 1, 0, 1, 0), send("invoke", 1, 2, 0, 2, 0)]
    write_side(tmp_path / "slot0.ops", ops)
    raw = bytearray((tmp_path / "slot0.ops").read_bytes())
    recs = np.frombuffer(bytes(raw[32:]), dtype=send_records(0).dtype).copy()
    edit(recs[1:2])
    (tmp_path / "slot0.ops").write_bytes(bytes(raw[:32]) + recs.tobytes())
    with pytest.raises(HistoryError, match=says):
        build(tmp_path / JSONL_NAME, [open_side(tmp_path / "slot0.ops")], tmp_path / "h.parquet")
    assert not (tmp_path / "h.parquet").exists()


def test_a_process_invoking_twice_is_refused_as_the_reader_refuses_it(tmp_path):
    (tmp_path / JSONL_NAME).write_bytes(main_bytes([]))
    write_side(
        tmp_path / "slot0.ops", [send("invoke", 3, 1, 0, 1, 0), send("invoke", 3, 2, 0, 2, 0)]
    )
    with pytest.raises(HistoryError, match=r"slot0.ops:2: process 3 invokes again"):
        build(tmp_path / JSONL_NAME, [open_side(tmp_path / "slot0.ops")], tmp_path / "h.parquet")


def test_a_process_in_two_writers_is_refused(tmp_path):
    main = [{"type": "invoke", "f": "poll", "value": [["poll"]], "process": 3, "time": 0}]
    (tmp_path / JSONL_NAME).write_bytes(main_bytes(main))
    write_side(tmp_path / "slot0.ops", [send("invoke", 3, 1, 0, 1, 0)])
    with pytest.raises(HistoryError, match=r"process 3 has ops in both history\.jsonl and slot0"):
        build(tmp_path / JSONL_NAME, [open_side(tmp_path / "slot0.ops")], tmp_path / "h.parquet")


def test_a_history_merged_already_is_refused(tmp_path):
    header = {"kchaos_history": 1, "run": "t", JVM_SENDS_FIELD: {"files": []}}
    (tmp_path / JSONL_NAME).write_bytes(main_bytes([], header))
    with pytest.raises(HistoryError, match="merged already"):
        build(tmp_path / JSONL_NAME, [], tmp_path / "h.parquet")


# Run directories -------------------------------------------------------------------------------
def write_run(tmp_path: Path, main: list[dict], sides: dict[str, list[dict]]) -> Path:
    (tmp_path / JSONL_NAME).write_bytes(main_bytes(main))
    d = tmp_path / JVM_SENDS_DIR
    d.mkdir()
    for name, ops in sides.items():
        write_side(d / name, ops)
    (d / "slot0.acked").write_bytes(b"\0" * 24)  # not a history file: never read
    return tmp_path


NEMESIS = [{"type": "invoke", "f": "start-kill", "value": None, "process": "nemesis", "time": 5}]
SENDS = [send("invoke", 0, 3, 1, 11, 0), send("ok", 0, 9, 1, 11, 0)]


def test_build_run_writes_the_parquet_history_and_removes_what_it_was_built_from(tmp_path):
    polls = [final_poll("invoke", 40, 20), final_poll("ok", 40, 22, {"1": [[0, 11]]})]
    run = write_run(tmp_path, NEMESIS, {"slot0.ops": SENDS, "final.ops": polls})
    assert pending(run) and [p.name for p in side_files(run / JVM_SENDS_DIR)] == [
        "slot0.ops",
        "final.ops",
    ]
    done = build_run(run)
    assert done is not None and done.side_ops == 4 and done.ops == 5
    assert built(run) and not pending(run)
    assert not (run / JVM_SENDS_DIR).exists() and not (run / JSONL_NAME).exists()
    assert not list(run.glob(".*tmp"))
    # history.jsonl for people, from the Parquet file: the merged history.
    history = read_history(run)
    assert [(o["index"], o["time"], o["f"]) for o in history.ops] == [
        (0, 3, "send"), (1, 5, "start-kill"), (2, 9, "send"), (3, 20, "poll"), (4, 22, "poll"),
    ]  # fmt: skip
    assert history.ops[4]["value"] == [["poll", {"1": [[0, 11]]}]]
    assert history.invoke_of == {2: 0, 4: 3}
    assert history.header[JVM_SENDS_FIELD] == {"files": ["slot0.ops", "final.ops"]}
    assert build_run(run) is None  # nothing left to build


def test_what_a_build_cut_short_after_its_rename_left_is_only_removed(tmp_path):
    run = write_run(tmp_path, NEMESIS, {"slot0.ops": SENDS})
    build_run(run)
    before = (run / PARQUET_NAME).read_bytes()
    # The recorder's history and the side files, as a crash before the clean-up leaves them.
    write_run(tmp_path, NEMESIS, {"slot0.ops": SENDS})
    assert not pending(run)
    assert build_run(run) is None
    assert (run / PARQUET_NAME).read_bytes() == before
    assert not (run / JVM_SENDS_DIR).exists() and not (run / JSONL_NAME).exists()


def test_a_build_cut_short_before_its_rename_is_done_again(tmp_path):
    run = write_run(tmp_path, NEMESIS, {"slot0.ops": SENDS})
    (run / f".{PARQUET_NAME}.1.tmp").write_bytes(b"half a build")
    (run / PARQUET_NAME).write_bytes(b"a copy converted from the recorder's history alone")
    assert pending(run)
    build_run(run)
    assert len(read_history(run).ops) == 3


def test_a_build_that_fails_leaves_the_run_as_it_was(tmp_path):
    run = write_run(tmp_path, NEMESIS, {"slot0.ops": SENDS})
    side = run / JVM_SENDS_DIR / "slot0.ops"
    side.write_bytes(b"not a side file" + b"\0" * 100)
    with pytest.raises(HistoryError, match="not a kchaos side file"):
        build_run(run)
    assert pending(run) and (run / JSONL_NAME).exists() and side.exists()


def test_highest_process_reads_a_side_file(tmp_path):
    write_side(
        tmp_path / "slot0.ops", [send("invoke", 4000, 1, 0, 1, 0), send("info", 12, 2, 0, 1, 0)]
    )
    write_side(tmp_path / "final.ops", [final_poll("invoke", 7, 1), final_poll("info", 7, 2)])
    assert highest_process(tmp_path / "slot0.ops") == 4000
    assert highest_process(tmp_path / "final.ops") == 7


def test_kchaos_history_writes_a_built_runs_jsonl(tmp_path):
    from click.testing import CliRunner

    from harness.cli import main

    polls = [final_poll("invoke", 40, 20), final_poll("ok", 40, 22, {"1": [[0, 11]]})]
    (tmp_path / "run").mkdir()
    run = write_run(tmp_path / "run", NEMESIS, {"slot0.ops": SENDS, "final.ops": polls})
    got = CliRunner().invoke(main, ["history", str(run)])  # built first, as check does
    assert got.exit_code == 0, got.output
    assert not (run / JVM_SENDS_DIR).exists()
    lines = [json.loads(x) for x in got.stdout.splitlines() if x.startswith("{")]
    assert lines[0][JVM_SENDS_FIELD] == {"files": ["slot0.ops", "final.ops"]}
    assert [op["index"] for op in lines[1:]] == [0, 1, 2, 3, 4]
    out = tmp_path / "h.jsonl"
    assert CliRunner().invoke(main, ["history", str(run), "-o", str(out)]).exit_code == 0
    assert read_history(out).ops == read_history(run).ops
    gone = CliRunner().invoke(main, ["history", str(tmp_path / "nowhere")])
    assert gone.exit_code == 254 and "no such run directory" in gone.output


def test_strings_are_json_lines_named_by_their_line(tmp_path):
    w = SideWriter(tmp_path / "slot0.ops", SENDS_TAG)
    assert [w.string(s) for s in ("n1", 'a "quoted"\nünï', "n1", None)] == [0, 1, 0, -1]
    w.close()
    lines = (tmp_path / "slot0.strings").read_bytes().splitlines()
    assert [json.loads(x) for x in lines] == ["n1", 'a "quoted"\nünï']


def test_a_check_never_replaces_a_built_history_with_what_is_left_beside_it(tmp_path):
    """Cut short after its rename, a build leaves the recorder's history.jsonl (a part of the
    history) beside the built Parquet file: `kchaos check` cleans it up, and a history.jsonl
    derived by `kchaos history` beside it is read as the copy it is, never converted over it."""
    from click.testing import CliRunner

    from harness.cli import main

    run = write_run(tmp_path, NEMESIS, {"slot0.ops": SENDS})
    build_run(run)
    built_bytes = (run / PARQUET_NAME).read_bytes()
    write_run(tmp_path, NEMESIS, {"slot0.ops": SENDS})  # what the clean-up had left
    got = CliRunner().invoke(main, ["check", str(run)])
    assert json.loads((run / "results.json").read_text())["status"] == "unknown", got.output
    assert (run / PARQUET_NAME).read_bytes() == built_bytes
    assert not (run / JSONL_NAME).exists() and not (run / JVM_SENDS_DIR).exists()
    assert (
        CliRunner().invoke(main, ["history", str(run), "-o", str(run / JSONL_NAME)]).exit_code == 0
    )
    CliRunner().invoke(main, ["check", str(run)])
    assert (run / PARQUET_NAME).read_bytes() == built_bytes and (run / JSONL_NAME).exists()
