"""A completion's further op fields (workloads/client.py Completion.extra): written after the
recorder's own fields, absent lines unchanged, and never in place of the history's own."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from harness.run.recorder import Recorder
from harness.run.workers import Clients, ProcessIds
from history.reader import read_history
from workloads.client import Completion, Invocation


def _line(path: Any, n: int) -> dict[str, Any]:
    return json.loads(path.read_text().splitlines()[n])


def test_extra_fields_come_last_in_their_order(tmp_path):
    rec = Recorder(tmp_path / "h.jsonl", "r/1")
    extra = {"rebalance": [["assigned", [0, 2], 5]], "commit": {"0": 3}}
    rec.record("ok", "poll", [["poll", {}]], 0, extra=extra)
    rec.close()
    line = _line(tmp_path / "h.jsonl", 1)
    assert list(line) == [
        "index", "type", "f", "value", "process", "time", "wall", "node", "rebalance", "commit"
    ]  # fmt: skip
    assert line["rebalance"] == [["assigned", [0, 2], 5]] and line["commit"] == {"0": 3}


@pytest.mark.parametrize("extra", [None, {}])
def test_no_extra_fields_leave_the_line_as_it_was(tmp_path, extra):
    rec = Recorder(tmp_path / "h.jsonl", "r/1")
    rec.record("fail", "poll", [["poll"]], 3, "n1", "why", extra=extra)
    rec.record("ok", "send", [["send", 0, [1, 2]]], 3, "n1", producer=1, extra=extra)
    rec.close()
    first, second = _line(tmp_path / "h.jsonl", 1), _line(tmp_path / "h.jsonl", 2)
    assert list(first) == [
        "index",
        "type",
        "f",
        "value",
        "process",
        "error",
        "time",
        "wall",
        "node",
    ]
    assert list(second) == [
        "index", "type", "f", "value", "process", "time", "wall", "node", "producer"
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["time", "node", "error", "producer", "index"])
def test_a_field_of_the_history_itself_is_refused(tmp_path, name):
    rec = Recorder(tmp_path / "h.jsonl", "r/1")
    with pytest.raises(ValueError, match=name):
        rec.record("ok", "poll", [], 0, extra={name: 1})
    rec.close()


class _Client:
    process = 4
    setup_op = None

    def open(self, op: Invocation) -> Completion:
        return Completion("ok", op.value)

    def next_op(self) -> Invocation:
        return Invocation("poll", [["poll"]])

    def apply(self, op: Invocation) -> Completion:
        return Completion("ok", [["poll", {}]], extra={"commit_error": "refused"})

    def close(self) -> None:
        pass


def test_clients_record_a_completions_extra_fields(tmp_path):
    rec = Recorder(tmp_path / "h.jsonl", "r/1")
    clients = Clients(None, rec, 1, 1, 0, ProcessIds(1), threading.Event())  # type: ignore[arg-type]
    client = _Client()
    assert clients.do(client, client.next_op(), client.apply)
    rec.close()
    invoke, done = read_history(tmp_path / "h.jsonl").ops
    assert "commit_error" not in invoke and done["commit_error"] == "refused"
