"""The share workload's operations (docs/history.md, "The share workload"): a hand-written
history of them is read by the JSONL reader and from its columnar form alike, flattened into
deliveries, acknowledgements and outcomes by history/share.py, and a value that is not the
documented shape is one error naming its op."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from history.errors import HistoryError
from history.reader import read_history
from history.share import (
    FROM_CALLBACK,
    FROM_COMMIT,
    VIA_COMMIT,
    VIA_POLL,
    Ack,
    Delivery,
    Outcome,
    read_share,
    read_share_parquet,
)
from history.stream import convert

HEADER = {
    "kchaos_history": 1,
    "run": "share/r",
    "started_wall": 0.0,
    "client": "java",
    "share": {"group": "kchaos-<run>-share", "lock_ms": 2000, "delivery_limit": 5},
}
REFUSED = "InvalidRecordStateException: The record state is invalid."
SUB = {"group": "kchaos-share-r-share", "topic": "kchaos-share", "ack_mode": "explicit"}

# Process 4 (explicit): a poll hands over offsets 7 and 8 of partition 0, the first is
# released and the second held past its lock, then accepted late and refused; process 5
# (implicit) gets 7 again and its next poll carries the acceptance; the drain's offsets.
OPS: list[dict[str, Any]] = [
    {"type": "invoke", "f": "send", "process": 0, "time": 10, "value": [["send", 0, 1]]},
    {"type": "ok", "f": "send", "process": 0, "time": 20, "value": [["send", 0, [7, 1]]]},
    {"type": "invoke", "f": "share-subscribe", "process": 4, "time": 30, "value": SUB},
    {"type": "ok", "f": "share-subscribe", "process": 4, "time": 40, "value": SUB},
    {"type": "invoke", "f": "share-poll", "process": 4, "time": 50, "value": {"acks": []}},
    {"type": "ok", "f": "share-poll", "process": 4, "time": 60,
     "value": {"acks": [], "records": [[0, 7, 1, 1], [0, 8, 2, 1]], "handed": 55,
               "lock_ms": 2000, "acked": []}},
    {"type": "invoke", "f": "share-ack", "process": 4, "time": 70,
     "value": {"acks": [[0, 7, "release"]], "held": [[0, 8]]}},
    {"type": "ok", "f": "share-ack", "process": 4, "time": 80,
     "value": {"acks": [[0, 7, "release"]], "held": [[0, 8]], "commit": {"0": "ok"},
               "committed": 78, "acked": [[0, [7], "ok"]]}},
    {"type": "invoke", "f": "share-subscribe", "process": 5, "time": 81,
     "value": {**SUB, "ack_mode": "implicit"}},
    {"type": "ok", "f": "share-subscribe", "process": 5, "time": 82,
     "value": {**SUB, "ack_mode": "implicit"}},
    {"type": "invoke", "f": "share-poll", "process": 5, "time": 83, "value": {"acks": []}},
    {"type": "ok", "f": "share-poll", "process": 5, "time": 85,
     "value": {"acks": [], "records": [[0, 7, 1, 2]], "handed": 84, "lock_ms": None,
               "acked": []}},
    {"type": "invoke", "f": "share-ack", "process": 4, "time": 4000,
     "value": {"acks": [[0, 8, "accept"]]}},
    {"type": "ok", "f": "share-ack", "process": 4, "time": 4010,
     "value": {"acks": [[0, 8, "accept"]], "commit": {"0": REFUSED}, "committed": 4005,
               "acked": [[0, [8], REFUSED]]}},
    {"type": "invoke", "f": "share-poll", "process": 5, "time": 4020,
     "value": {"acks": [[0, 7, "accept"]]}},
    {"type": "ok", "f": "share-poll", "process": 5, "time": 4030,
     "value": {"acks": [[0, 7, "accept"]], "records": [], "handed": 4025, "lock_ms": None,
               "acked": []}},
    {"type": "invoke", "f": "share-poll", "process": 5, "time": 4040, "value": {"acks": []}},
    {"type": "ok", "f": "share-poll", "process": 5, "time": 4050,
     "value": {"acks": [], "records": [], "handed": 4045, "lock_ms": None,
               "acked": [[0, [7], "ok"]]}},
    {"type": "invoke", "f": "share-offsets", "process": 9, "time": 5000,
     "value": {"group": "kchaos-share-r-share"}},
    {"type": "ok", "f": "share-offsets", "process": 9, "time": 5010,
     "value": {"group": "kchaos-share-r-share",
               "offsets": {"0": {"start": 9, "lag": 0, "epoch": 1}}}},
]  # fmt: skip


def _history(tmp_path: Path, ops: list[dict[str, Any]] = OPS) -> Path:
    path = tmp_path / "history.jsonl"
    lines = [HEADER] + [{"index": i, **o} for i, o in enumerate(ops)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _check(share: Any) -> None:
    assert share.modes == {4: "explicit", 5: "implicit"}
    assert share.subscribed == {4: 30, 5: 81}
    assert share.deliveries == [
        Delivery(5, 4, 0, 7, 1, 1, 50, 60, 55, 2000),
        Delivery(5, 4, 0, 8, 2, 1, 50, 60, 55, 2000),
        Delivery(11, 5, 0, 7, 1, 2, 83, 85, 84, None),
    ]
    assert share.acks == [
        Ack(6, 4, 0, 7, "release", VIA_COMMIT, 70, "ok"),
        Ack(12, 4, 0, 8, "accept", VIA_COMMIT, 4000, "ok"),
        Ack(14, 5, 0, 7, "accept", VIA_POLL, 4020, "ok"),
    ]
    assert share.held == [(7, 4, 0, 8)]
    assert share.outcomes == [
        Outcome(7, 4, 0, 7, "ok", FROM_COMMIT, 80),
        Outcome(7, 4, 0, 7, "ok", FROM_CALLBACK, 80),
        Outcome(13, 4, 0, 8, REFUSED, FROM_COMMIT, 4010),
        Outcome(13, 4, 0, 8, REFUSED, FROM_CALLBACK, 4010),
        Outcome(17, 5, 0, 7, "ok", FROM_CALLBACK, 4050),
    ]
    (offsets,) = share.offsets
    assert (offsets.index, offsets.start, offsets.lag) == (19, {0: 9}, {0: 0})


def test_the_jsonl_reader_reads_them_and_share_ops_flatten_them(tmp_path):
    history = read_history(_history(tmp_path))
    assert history.header["share"]["lock_ms"] == 2000
    _check(read_share(history.ops))


def test_the_columnar_form_carries_them_the_same(tmp_path):
    out = tmp_path / "history.parquet"
    convert(_history(tmp_path), out)
    _check(read_share_parquet(out))


def test_an_invocation_never_completed_sent_its_acks_with_an_unknown_outcome(tmp_path):
    cut = OPS[:7]  # the share-ack of process 4 invoked, never completed
    share = read_share(read_history(_history(tmp_path, cut)).ops)
    assert share.acks == [Ack(6, 4, 0, 7, "release", VIA_COMMIT, 70, None)]
    assert share.outcomes == []


@pytest.mark.parametrize(
    ("at", "value", "says"),
    [
        (5, {"acks": [], "records": [[0, 7, 1]]}, "op 5 (share-poll): record [0, 7, 1]"),
        (5, {"acks": [], "records": [[0, 7, 1, 1]], "handed": "soon"}, "handed 'soon'"),
        (6, {"acks": [[0, 7, "maybe"]]}, "op 6 (share-ack): ack [0, 7, 'maybe']"),
        (7, {"acks": [[0, 7, "release"]], "commit": {"0": 3}}, "commit outcome 3"),
        (7, {"acks": [], "acked": [[0, 7, "ok"]]}, "is not [key, [offsets], outcome]"),
        (7, {"acks": [], "held": [[0]]}, "held is not a list of [key, offset]"),
        (19, {"offsets": {"x": {"start": 1}}}, "offsets entry 'x'"),
        (2, {"group": "g", "ack_mode": "sometimes"}, "ack_mode 'sometimes'"),
        (4, [["poll"]], "value is [['poll']], expected an object"),
    ],
)
def test_a_value_not_of_the_documented_shape_is_one_error_naming_its_op(tmp_path, at, value, says):
    ops = [dict(o) for o in OPS]
    ops[at]["value"] = value
    with pytest.raises(HistoryError, match=r"op [0-9]+ ") as bad:
        read_share(read_history(_history(tmp_path, ops)).ops, "h")
    assert says in str(bad.value)
