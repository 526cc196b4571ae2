"""The recorder's pipelined-send lines (Recorder.send_invoke, send_ok: encoded without json) are
the lines `record` writes for the same ops: the same fields in the same order, read back by
history/reader.py as the same ops, whatever the keys, values, offsets, processes and nodes."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.run.recorder import Recorder
from history.reader import read_history

ints = st.integers(min_value=0, max_value=2**62)
nodes = st.one_of(st.none(), st.sampled_from(["n1", "n2", "kafka-3"]), st.text(max_size=8))
sends = st.lists(
    st.tuples(ints, ints, st.one_of(st.none(), ints), ints, nodes, ints),
    min_size=1,
    max_size=20,
)


def _record(fast: bool, ops: list[tuple[Any, ...]], path: Path) -> None:
    rec = Recorder(path, "r/1")
    for key, value, offset, process, node, producer in ops:
        if fast:
            rec.send_invoke(key, value, process, node, producer)
            rec.send_ok(key, offset, value, process, node, producer)
        else:
            rec.invoke("send", [["send", key, value]], process, node, producer=producer)
            rec.record(
                "ok", "send", [["send", key, [offset, value]]], process, node, None, producer
            )
    rec.close()


# Times differ between two recordings: everything else must be the same bytes.
_CLOCK = re.compile(r'"time":\d+,"wall":[0-9.e+-]+,')


# Each example writes and merges files: the CI profile's 10,000 would take minutes.
@settings(max_examples=300)
@given(sends)
def test_fast_send_lines_are_the_json_lines(ops):
    with tempfile.TemporaryDirectory() as tmp:
        fast, slow = Path(tmp) / "fast.jsonl", Path(tmp) / "slow.jsonl"
        _record(True, ops, fast)
        _record(False, ops, slow)
        fast_lines = fast.read_text(encoding="utf-8").splitlines()[1:]
        slow_lines = slow.read_text(encoding="utf-8").splitlines()[1:]
        assert [_CLOCK.sub("", line) for line in fast_lines] == [
            _CLOCK.sub("", line) for line in slow_lines
        ]
        read_fast, read_slow = read_history(fast).ops, read_history(slow).ops
        assert len(read_fast) == 2 * len(ops)
        for a, b in zip(read_fast, read_slow, strict=True):
            assert list(a) == list(b)  # the same fields, in the same order
            assert {k: v for k, v in a.items() if k not in ("time", "wall")} == {
                k: v for k, v in b.items() if k not in ("time", "wall")
            }
        # Each fast line is plain JSON of its own, and its clock reads as the json path's.
        for line in fast_lines:
            op = json.loads(line)
            assert isinstance(op["time"], int) and isinstance(op["wall"], float)


def test_fast_lines_after_close_write_nothing(tmp_path):
    rec = Recorder(tmp_path / "h.jsonl", "r/1")
    rec.send_invoke(0, 1, 0, "n1", 0)
    rec.close()
    rec.send_ok(0, 5, 1, 0, "n1", 0)
    assert len(read_history(tmp_path / "h.jsonl").ops) == 1
    assert rec.counts["ok"] == 0
