"""Merging JVM-recorded side files into a history (history/merge.py): generated histories split
over a main history and side files merge into one well-formed history in time order, each
input's ops kept in their order, nothing lost; torn last lines are dropped and said; anything
else that does not parse names its file and line; merge_run is crash-safe and idempotent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from history.errors import HistoryError
from history.format import JSONL_NAME, JVM_SENDS_DIR, JVM_SENDS_FIELD
from history.merge import Source, highest_process, merge, merge_run, pending, side_files
from history.reader import parse_history, read_history

HEADER = {"kchaos_history": 1, "started_wall": 1.0, "run": "t", "send_mode": "async"}


def main_line(index: int, op: dict[str, Any]) -> bytes:
    """As the harness's recorder writes it: index first."""
    return (json.dumps({"index": index, **op}, separators=(",", ":")) + "\n").encode()


def side_line(op: dict[str, Any]) -> bytes:
    """As the JVM writes it: no index, time first."""
    rest = {k: v for k, v in op.items() if k != "time"}
    return (json.dumps({"time": op["time"], **rest}, separators=(",", ":")) + "\n").encode()


def main_bytes(ops: list[dict[str, Any]], header: dict[str, Any] | None = None) -> bytes:
    out = json.dumps(header or HEADER).encode() + b"\n"
    return out + b"".join(main_line(i, op) for i, op in enumerate(ops))


def send(type_: str, process: int, time: int, key: int, value: int, producer: int) -> dict:
    v: Any = [["send", key, value]]
    if type_ == "ok":
        v = [["send", key, [time, value]]]
    op = {"type": type_, "f": "send", "value": v, "process": process}
    if type_ in ("fail", "info"):
        op["error"] = 'retriable: TimeoutException: "quoted" ünïcode'
    return {**op, "time": time, "wall": 1.5, "node": "n1", "producer": producer}


@st.composite
def stream(draw: Any, kind: str, n: int) -> list[dict[str, Any]]:
    """One writer's ops in time order: its processes invoke and complete, one op at a time
    each, times non-decreasing (ties allowed), some left open at the end."""
    procs = (
        ["nemesis", "observer", 10_000 + n] if kind == "main" else [n * 100 + j for j in range(3)]
    )
    busy: dict[Any, dict[str, Any]] = {}
    ops: list[dict[str, Any]] = []
    t = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 14))):
        t += draw(st.integers(0, 3))
        free = [p for p in procs if p not in busy]
        if busy and (not free or draw(st.booleans())):
            p = draw(st.sampled_from(sorted(busy, key=str)))
            inv = busy.pop(p)
            if kind == "main":
                ops.append({**inv, "type": draw(st.sampled_from(["ok", "info"])), "time": t})
            else:
                _, key, value = inv["value"][0]
                typ = draw(st.sampled_from(["ok", "fail", "info"]))
                ops.append(send(typ, p, t, key, value, n))
        else:
            p = draw(st.sampled_from(free))
            if kind == "main":
                f = "observe" if p == "observer" else "start-kill" if p == "nemesis" else "poll"
                inv = {"type": "invoke", "f": f, "value": None, "process": p, "time": t}
            else:
                inv = send("invoke", p, t, draw(st.integers(0, 7)), len(ops), n)
            busy[p] = inv
            ops.append(inv)
    return ops


@st.composite
def split_history(draw: Any) -> tuple[list[dict], list[list[dict]]]:
    main = draw(stream("main", 0))
    sides = [draw(stream("side", i)) for i in range(draw(st.integers(0, 3)))]
    return main, sides


def run_merge(main: bytes, sides: dict[str, bytes]) -> tuple[bytes, Any]:
    out: list[bytes] = []
    done = merge(
        Source.of(JSONL_NAME, main),
        [Source.of(name, data) for name, data in sides.items()],
        out.append,
    )
    return b"".join(out), done


def without_index(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in op.items() if k != "index"} for op in ops]


def key(op: dict[str, Any]) -> str:
    return json.dumps(op, sort_keys=True)


# Each example writes and merges files: the CI profile's 10,000 would take minutes.
@settings(max_examples=300)
@given(split_history())
def test_a_merged_history_is_well_formed_in_time_order_and_loses_nothing(split):
    main, sides = split
    names = {f"slot{i}.jsonl": ops for i, ops in enumerate(sides)}
    merged, done = run_merge(
        main_bytes(main), {n: b"".join(side_line(o) for o in ops) for n, ops in names.items()}
    )
    # Well-formed: the reader's own rules (dense indices, one op at a time per process, every
    # completion after its invocation with the same f).
    history = parse_history(merged, "merged")
    ops = without_index(history.ops)
    times = [op["time"] for op in ops]
    assert times == sorted(times)
    # Nothing lost, nothing added.
    inputs = main + [op for s in sides for op in s]
    assert sorted(map(key, ops)) == sorted(map(key, inputs))
    # Each input's own order kept.
    for stream_ops in [main, *sides]:
        mine = {key(o) for o in stream_ops}
        assert [key(o) for o in ops if key(o) in mine] == [key(o) for o in stream_ops]
    assert done.ops == len(inputs)
    assert done.side_ops == sum(map(len, sides))
    assert history.header[JVM_SENDS_FIELD] == {"files": list(names)}
    assert history.notes() == [] or all("never completed" in n for n in history.notes())


# Each example writes and merges files: the CI profile's 10,000 would take minutes.
@settings(max_examples=300)
@given(split_history(), st.data())
def test_a_torn_last_line_is_dropped_and_said_and_the_rest_kept(split, data):
    main, sides = split
    sides = [s for s in sides if s]
    if not sides:
        sides = [[send("invoke", 0, 1, 0, 1, 0)]]
    torn_at = data.draw(st.integers(0, len(sides) - 1))
    files: dict[str, bytes] = {}
    for i, ops in enumerate(sides):
        raw = b"".join(side_line(o) for o in ops)
        if i == torn_at:
            last = side_line(ops[-1])
            cut = data.draw(st.integers(1, len(last) - 1))  # at least the newline is gone
            raw = raw[: len(raw) - cut]
        files[f"slot{i}.jsonl"] = raw
    merged, done = run_merge(main_bytes(main), files)
    history = parse_history(merged, "merged")
    assert done.torn == [f"slot{torn_at}.jsonl"]
    kept = main + [op for i, s in enumerate(sides) for op in (s[:-1] if i == torn_at else s)]
    assert sorted(map(key, without_index(history.ops))) == sorted(map(key, kept))
    notes = history.notes()
    assert any(f"jvm-sends/slot{torn_at}.jsonl: last line is torn" in n for n in notes), notes


def test_a_torn_main_history_keeps_its_whole_lines_and_says_so():
    main = [{"type": "invoke", "f": "observe", "value": None, "process": "observer", "time": 1}]
    raw = main_bytes(main) + b'{"index":1,"type":"ok","f":"obs'
    side = side_line(send("invoke", 0, 2, 3, 7, 0))
    merged, done = run_merge(raw, {"slot0.jsonl": side})
    history = parse_history(merged, "m")
    assert done.history_torn and len(history.ops) == 2
    assert any("history.jsonl: its last line was torn" in n for n in history.notes())


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b'{"type":"invoke","time":1}\n', "not a side-file op line"),
        (b'{"time":x1,"type":"invoke"}\n', "not an integer"),
        (b'{"time":1,"type":"invoke"\n', "not a side-file op line"),
    ],
)
def test_a_side_line_that_does_not_parse_names_its_file_and_line(line, says):
    good = side_line(send("invoke", 0, 1, 0, 1, 0))
    with pytest.raises(HistoryError, match=f"slot3.jsonl:2: .*{says}"):
        run_merge(main_bytes([]), {"slot3.jsonl": good + line + good})


def test_a_main_line_without_a_time_names_its_line():
    raw = main_bytes([]) + b'{"index":0,"type":"invoke","f":"x","process":"nemesis"}\n'
    with pytest.raises(HistoryError, match=r"history\.jsonl:2: not an op line with a time"):
        run_merge(raw, {})


def test_a_history_merged_already_is_refused():
    merged, _ = run_merge(main_bytes([]), {"slot0.jsonl": b""})
    with pytest.raises(HistoryError, match="merged already"):
        run_merge(merged, {})


def write_run(tmp_path: Path, main: list[dict], sides: dict[str, bytes]) -> Path:
    (tmp_path / JSONL_NAME).write_bytes(main_bytes(main))
    d = tmp_path / JVM_SENDS_DIR
    d.mkdir()
    for name, data in sides.items():
        (d / name).write_bytes(data)
    (d / "slot0.acked").write_bytes(b"\0" * 24)  # not a history file: never merged
    return tmp_path


def test_merge_run_replaces_the_history_and_removes_the_side_files(tmp_path):
    main = [{"type": "invoke", "f": "start-kill", "value": None, "process": "nemesis", "time": 5}]
    sends = [send("invoke", 0, 3, 1, 11, 0), send("ok", 0, 9, 1, 11, 0)]
    sides = {"slot0.jsonl": b"".join(map(side_line, sends))}
    run = write_run(tmp_path, main, sides)
    assert pending(run) and [p.name for p in side_files(run)] == ["slot0.jsonl"]
    done = merge_run(run)
    assert done is not None and done.side_ops == 2
    history = read_history(run)
    assert [(o["index"], o["time"]) for o in history.ops] == [(0, 3), (1, 5), (2, 9)]
    assert history.invoke_of == {2: 0}
    assert not (run / JVM_SENDS_DIR).exists() and not pending(run)
    assert not list(run.glob("*.merging"))
    assert merge_run(run) is None  # nothing left to merge


def test_side_files_left_beside_a_merged_history_are_only_removed(tmp_path):
    """A merge cut short between its rename and its clean-up: never merged twice."""
    run = write_run(tmp_path, [], {"slot0.jsonl": side_line(send("invoke", 0, 3, 1, 11, 0))})
    merge_run(run)
    before = (run / JSONL_NAME).read_bytes()
    (run / JVM_SENDS_DIR).mkdir()
    (run / JVM_SENDS_DIR / "slot0.jsonl").write_bytes(side_line(send("invoke", 0, 3, 1, 11, 0)))
    assert not pending(run)
    assert merge_run(run) is None
    assert (run / JSONL_NAME).read_bytes() == before and not (run / JVM_SENDS_DIR).exists()


def test_a_merge_cut_short_before_its_rename_is_done_again(tmp_path):
    sides = {"slot0.jsonl": side_line(send("invoke", 0, 3, 1, 11, 0))}
    run = write_run(tmp_path, [], sides)
    (run / (JSONL_NAME + ".merging")).write_bytes(b"half a merge")
    merge_run(run)
    assert len(read_history(run).ops) == 1


def test_slot_files_merge_in_slot_order(tmp_path):
    sides = {f"slot{i}.jsonl": side_line(send("invoke", i * 100, 7, 0, i, i)) for i in (10, 2, 1)}
    run = write_run(tmp_path, [], sides)
    assert [p.name for p in side_files(run)] == ["slot1.jsonl", "slot2.jsonl", "slot10.jsonl"]
    merge_run(run)
    assert [o["process"] for o in read_history(run).ops] == [100, 200, 1000]


def test_highest_process_reads_a_side_file(tmp_path):
    p = tmp_path / "slot0.jsonl"
    p.write_bytes(
        side_line(send("invoke", 4000, 1, 0, 1, 0)) + side_line(send("info", 12, 2, 0, 1, 0))
    )
    assert highest_process(p) == 4000


def test_at_the_same_time_the_main_historys_op_comes_first():
    main = [{"type": "invoke", "f": "start-kill", "value": None, "process": "nemesis", "time": 5}]
    merged, _ = run_merge(
        main_bytes(main), {"slot0.jsonl": side_line(send("invoke", 0, 5, 1, 1, 0))}
    )
    assert [o["process"] for o in parse_history(merged, "m").ops] == ["nemesis", 0]


# The final reads' side file (--client java: workloads/java/KchaosFinal.java) ----------------
def final_poll(type_: str, process: int, time: int, read: dict[str, list] | None = None) -> dict:
    """A final poll op as the JVM writes it (docs/history.md, "Final reads")."""
    value: Any = [["poll"]] if type_ != "ok" else [["poll", read or {}]]
    op: dict[str, Any] = {"time": time, "type": type_, "f": "poll", "value": value}
    op["process"] = process
    if type_ == "info":
        op["error"] = "retriable: TimeoutException: no answer"
    return {**op, "wall": 2.5, "node": None}


@st.composite
def final_reads(draw: Any, after: int, first: int) -> list[dict[str, Any]]:
    """The JVM's final polls from time `after` on: invoke then ok or info, one process, a
    fresh one after each info; records of a few keys."""
    ops: list[dict[str, Any]] = []
    t, p = after, first
    for _ in range(draw(st.integers(1, 8))):
        t += draw(st.integers(1, 4))
        ops.append(final_poll("invoke", p, t))
        t += draw(st.integers(0, 4))
        if draw(st.integers(0, 4)) == 0:
            ops.append(final_poll("info", p, t))
            p += 1
            continue
        read = draw(
            st.dictionaries(
                st.sampled_from(["0", "1", "7"]),
                st.lists(st.tuples(st.integers(0, 99), st.integers(1, 10**12)), min_size=1),
                max_size=3,
            )
        )
        ops.append(final_poll("ok", p, t, {k: [list(r) for r in v] for k, v in read.items()}))
    return ops


def test_final_reads_merge_after_the_sends_and_beside_what_the_harness_recorded(tmp_path):
    """The workload's sends (a slot's file), then the final reads (final.jsonl) while the
    observer still samples (history.jsonl): merged by time, the final file listed last."""
    main = [
        {"type": "invoke", "f": "start-kill", "value": None, "process": "nemesis", "time": 4},
        {"type": "ok", "f": "start-kill", "value": None, "process": "nemesis", "time": 6},
        {"type": "invoke", "f": "observe", "value": None, "process": "observer", "time": 21},
        {"type": "ok", "f": "observe", "value": {}, "process": "observer", "time": 23},
    ]
    sends = [send("invoke", 0, 3, 1, 11, 0), send("ok", 0, 9, 1, 11, 0)]
    polls = [
        final_poll("invoke", 40, 20),
        final_poll("ok", 40, 22, {"1": [[0, 11]]}),
        final_poll("invoke", 40, 24),
        final_poll("info", 40, 25),
        final_poll("invoke", 41, 26),
        final_poll("ok", 41, 27),
    ]
    sides = {"final.jsonl": b"".join(map(side_line, polls))}
    sides["slot0.jsonl"] = b"".join(map(side_line, sends))
    run = write_run(tmp_path, main, sides)
    assert [p.name for p in side_files(run)] == ["slot0.jsonl", "final.jsonl"]
    done = merge_run(run)
    assert done is not None and done.side_ops == 8
    history = read_history(run)
    assert history.header[JVM_SENDS_FIELD] == {"files": ["slot0.jsonl", "final.jsonl"]}
    assert [(o["f"], o["type"], o["time"]) for o in history.ops] == [
        ("send", "invoke", 3), ("start-kill", "invoke", 4), ("start-kill", "ok", 6),
        ("send", "ok", 9), ("poll", "invoke", 20), ("observe", "invoke", 21),
        ("poll", "ok", 22), ("observe", "ok", 23), ("poll", "invoke", 24), ("poll", "info", 25),
        ("poll", "invoke", 26), ("poll", "ok", 27),
    ]  # fmt: skip
    assert history.ops[6]["value"] == [["poll", {"1": [[0, 11]]}]]
    assert not history.incomplete and history.notes() == []


# Each example writes and merges files: the CI profile's 10,000 would take minutes.
@settings(max_examples=300)
@given(split_history(), st.data())
def test_generated_final_reads_merge_last_and_a_torn_last_line_is_dropped(split, data):
    main, sides = split
    workload = [op for s in [main, *sides] for op in s]
    end = max((op["time"] for op in workload), default=0)
    polls = data.draw(final_reads(end, 10**6))
    raw = b"".join(side_line(o) for o in polls)
    torn = data.draw(st.booleans())
    cut = raw
    if torn:
        last = side_line(polls[-1])
        cut = raw[: len(raw) - len(last) + data.draw(st.integers(1, len(last) - 1))]
    names = {f"slot{i}.jsonl": b"".join(side_line(o) for o in ops) for i, ops in enumerate(sides)}
    merged, done = run_merge(main_bytes(main), {**names, "final.jsonl": cut})
    history = parse_history(merged, "merged")
    ops = without_index(history.ops)
    kept = polls[:-1] if torn else polls
    finals = [o for o in ops if o["process"] in {p["process"] for p in polls}]
    assert finals == kept
    # The final reads come after every op of the workload's clients (sends, and the main
    # history's client process), whose times all precede theirs.
    first_final = ops.index(finals[0]) if finals else len(ops)
    clients = [o for o in ops[first_final:] if isinstance(o["process"], int) and o not in finals]
    assert clients == []
    assert done.torn == (["final.jsonl"] if torn else [])
    assert (any("torn" in n for n in history.notes())) == torn
