import json
import threading

import pytest

from history.errors import HistoryError
from history.reader import read_history
from history.writer import HistoryWriter


def op(type_, f="send", process=0, time=0, value=None, **kw):
    return {"type": type_, "f": f, "process": process, "time": time, "value": value, **kw}


def test_round_trip_assigns_dense_indices(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, "queue/test", fsync_every=1) as w:
        w.append(op("invoke", value=[["send", 1, 5]]))
        w.append(op("ok", time=10, value=[["send", 1, [0, 5]]]))
    h = read_history(tmp_path)  # a run directory resolves to its history.jsonl
    assert [o["index"] for o in h.ops] == [0, 1]
    assert h.header["run"] == "queue/test"
    assert h.invoke_of == {1: 0}
    assert not h.torn_last_line and h.incomplete == []


def test_writer_refuses_to_overwrite(tmp_path):
    path = tmp_path / "history.jsonl"
    HistoryWriter(path, "r").close()
    with pytest.raises(FileExistsError):
        HistoryWriter(path, "r")


def test_every_appended_line_is_on_disk_before_append_returns(tmp_path):
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, "r")
    w.append(op("invoke"))
    # Not closed: a SIGKILL now must still leave this line readable.
    assert len(read_history(path).ops) == 1
    w.close()


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, "r", fsync_every=50) as w:

        def client(p):
            for i in range(200):
                w.append(op("invoke", process=p, time=i))
                w.append(op("ok", process=p, time=i))

        threads = [threading.Thread(target=client, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    h = read_history(path)
    assert len(h.ops) == 1600
    assert [o["index"] for o in h.ops] == list(range(1600))


def test_torn_last_line_is_dropped_and_reported(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, "r") as w:
        w.append(op("invoke"))
    with open(path, "a") as f:
        f.write('{"index": 1, "type": "ok", "f": "se')
    h = read_history(path)
    assert len(h.ops) == 1
    assert h.torn_last_line
    assert h.incomplete == [0]
    assert any("torn" in n and ":3:" in n for n in h.notes())


def write_lines(path, *lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


HEADER = json.dumps({"kchaos_history": 1, "run": "r", "started_wall": 0.0})


@pytest.mark.parametrize(
    ("lines", "line", "fragment"),
    [
        ([], None, "empty file"),
        (['{"hello": 1}'], 1, "not a kchaos history header"),
        (['{"kchaos_history": 2}'], 1, "format 2"),
        ([HEADER, "{not json"], 2, "not JSON"),
        ([HEADER, "[1, 2]"], 2, "expected a JSON object"),
        ([HEADER, '{"index": 0, "type": "ok", "f": "send", "process": 0}'], 2, "no 'time'"),
        (
            [HEADER, '{"index": 3, "type": "invoke", "f": "send", "process": 0, "time": 0}'],
            2,
            "index 3 out of order",
        ),
        (
            [HEADER, '{"index": 0, "type": "maybe", "f": "send", "process": 0, "time": 0}'],
            2,
            "type 'maybe'",
        ),
        (
            [HEADER, '{"index": 0, "type": "ok", "f": "send", "process": 0, "time": 0}'],
            2,
            "without an invocation",
        ),
        (
            [HEADER, '{"index": 0, "type": "invoke", "f": "send", "process": true, "time": 0}'],
            2,
            "'process' is True",
        ),
        (
            [
                HEADER,
                '{"index": 0, "type": "invoke", "f": "send", "process": 0, "time": 0}',
                '{"index": 1, "type": "invoke", "f": "poll", "process": 0, "time": 1}',
            ],
            3,
            "still open",
        ),
        (
            [
                HEADER,
                '{"index": 0, "type": "invoke", "f": "send", "process": 0, "time": 0}',
                '{"index": 1, "type": "ok", "f": "poll", "process": 0, "time": 1}',
            ],
            3,
            "does not match",
        ),
    ],
)
def test_malformed_histories_name_file_and_line(tmp_path, lines, line, fragment):
    path = write_lines(tmp_path / "history.jsonl", *lines)
    with pytest.raises(HistoryError) as e:
        read_history(path)
    assert e.value.line == line
    assert fragment in str(e.value)
    assert str(e.value).startswith(str(path))


def test_missing_file_is_a_history_error(tmp_path):
    with pytest.raises(HistoryError, match="no such history file"):
        read_history(tmp_path / "nope")
