"""A pipelined run's recorder writes its sends beside history.jsonl as binary records
(harness/run/recorder.py `sends_beside`; docs/history.md, "Pipelined sends"): the history built
from both (history/build.py) holds the ops the recorder writes as lines without it, in the same
order, whatever mix of fast and general sends, completions, drains and other processes' ops."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.run.recorder import SENDS_SIDE_FILE, Recorder
from harness.run.wrapup import keep_history
from history.format import JSONL_NAME, JVM_SENDS_DIR, JVM_SENDS_FIELD, PARQUET_NAME
from history.reader import read_history

LANES = [0, 1, 2]


@st.composite
def actions(draw: Any) -> list[tuple[Any, ...]]:
    """What a pipelined slot and the rest of a run ask the recorder, in order: sends invoked
    on free lanes and completed (ok, fail, info; the fast lines or `record`), other processes'
    ops between them, a nemesis op, the drain's info at the end."""
    out: list[tuple[Any, ...]] = []
    busy: dict[int, tuple[int, int]] = {}
    lanes = list(LANES)
    n = 0
    for _ in range(draw(st.integers(0, 25))):
        free = [p for p in lanes if p not in busy]
        choice = draw(st.sampled_from(["invoke", "complete", "other"]))
        if choice == "invoke" and free:
            p = draw(st.sampled_from(free))
            n += 1
            busy[p] = (draw(st.integers(0, 7)), n)
            out.append(
                ("invoke", p, *busy[p], draw(st.booleans()), draw(st.sampled_from(["n1", None])))
            )
        elif choice == "complete" and busy:
            p = draw(st.sampled_from(sorted(busy)))
            key, value = busy.pop(p)
            kind = draw(st.sampled_from(["ok-fast", "ok", "fail", "info"]))
            offset = draw(st.one_of(st.none(), st.integers(0, 99)))
            out.append((kind, p, key, value, offset))
            if kind == "info":  # the lane retires
                lanes[lanes.index(p)] = p + 100
        else:
            out.append(("other", draw(st.sampled_from(["nemesis", 50]))))
    for p, (key, value) in sorted(busy.items()):
        out.append(("drain", p, key, value))
    return out


def _play(rec: Recorder, acts: list[tuple[Any, ...]]) -> None:
    others: dict[Any, bool] = {}
    for a in acts:
        if a[0] == "invoke":
            _, p, key, value, fast, node = a
            if fast:
                rec.send_invoke(key, value, p, node, 0)
            else:
                rec.invoke("send", [["send", key, value]], p, node, producer=0)
        elif a[0] == "ok-fast":
            rec.send_ok(a[2], a[4], a[3], a[1], "n2", 0)
        elif a[0] in ("ok", "fail", "info"):
            kind, p, key, value, offset = a
            v: Any = [["send", key, [offset, value]]] if kind == "ok" else [["send", key, value]]
            error = None if kind == "ok" else f'{kind}: ünïcode "why"'
            rec.record(kind, "send", v, p, "n3", error, 0)
        elif a[0] == "drain":
            rec.record("info", "send", [["send", a[2], a[3]]], a[1], None, "no report", 0)
        else:
            who = a[1]
            f = "start-kill" if who == "nemesis" else "poll"
            if others.pop(who, False):
                rec.ok(f, [["poll", {"1": [[0, 1]]}]] if f == "poll" else {}, who)
            else:
                rec.invoke(f, [["poll"]] if f == "poll" else None, who)
                others[who] = True


def _ops(history: Any) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in op.items() if k not in ("time", "wall") and v is not None}
        for op in history.ops
    ]


# Each example records two runs and builds one: the CI profile's 10,000 would take minutes.
@settings(max_examples=120, deadline=None)
@given(actions())
def test_sends_written_beside_build_into_the_history_the_lines_would_be(acts):
    with tempfile.TemporaryDirectory() as tmp:
        lines_dir, beside_dir = Path(tmp) / "lines", Path(tmp) / "beside"
        lines_dir.mkdir()
        beside_dir.mkdir()
        header = {"send_mode": "async", "in_flight": 3}
        plain = Recorder(lines_dir / JSONL_NAME, "r/1", header=header, flush_seconds=0.2)
        _play(plain, acts)
        plain.close()
        rec = Recorder(
            beside_dir / JSONL_NAME, "r/1", header=header, flush_seconds=0.2, sends_beside=True
        )
        _play(rec, acts)
        counts = keep_history(rec, beside_dir, lambda m: None)
        assert counts == dict(plain.counts)
        want = read_history(lines_dir / JSONL_NAME)
        if any(a[0] in ("invoke",) for a in acts):
            assert (beside_dir / PARQUET_NAME).exists() and not (beside_dir / JSONL_NAME).exists()
            got = read_history(beside_dir)
            assert got.header[JVM_SENDS_FIELD] == {"files": [SENDS_SIDE_FILE]}
        else:  # no send: nothing beside, today's history.jsonl
            assert not (beside_dir / JVM_SENDS_DIR).exists()
            got = read_history(beside_dir / JSONL_NAME)
        assert _ops(got) == _ops(want)
        assert got.incomplete == want.incomplete
