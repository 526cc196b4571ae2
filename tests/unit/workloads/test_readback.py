"""The final reads' bookkeeping (workloads/readback.py) against the sets of (key, value) tuples
it replaced: the same acknowledged count, the same unread count and the same first missing
sends, whatever was acknowledged (one at a time or in bulk from a JVM) and whatever was read
(repeats, strangers, other keys); the outcome's shape as run.json has always held it; the
deadline's rule; the file the JVM reads."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads import queue
from workloads.java_final import tally_side_file
from workloads.queue_ops import final_outcome
from workloads.readback import (
    AckedSends,
    FinalTally,
    ReadDeadline,
    sorted_unique,
    write_wanted,
)

_pairs = st.lists(st.tuples(st.integers(0, 5), st.integers(-3, 40)), max_size=80)


def _old_outcome(wanted: set[tuple[int, int]], seen: set[tuple[int, int]]) -> dict:
    """What final_outcome said when it took the two sets (before workloads/readback.py)."""
    missing = sorted(wanted - seen)
    return {
        "acknowledged": len(wanted),
        "read_acknowledged": len(wanted) - len(missing),
        "missing": [list(m) for m in missing[:50]],
        "complete": not missing,
    }


@settings(max_examples=300, deadline=None)
@given(
    acked=_pairs,
    bulk=_pairs,
    polls=st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(-3, 45))), max_size=6),
    as_array=st.booleans(),
)
def test_the_tally_says_what_the_sets_said(acked, bulk, polls, as_array):
    sends = AckedSends()
    for k, v in acked:
        sends.add(k, v)
    sends.add_many(
        np.array([k for k, _ in bulk], dtype=np.int64),
        np.array([v for _, v in bulk], dtype=np.int64),
    )
    assert len(sends) == len(acked) + len(bulk)
    tally = FinalTally(sends.wanted())
    seen: set[tuple[int, int]] = set()
    for poll in polls:
        by_key: dict[int, list[int]] = {}
        for k, v in poll:
            by_key.setdefault(k, []).append(v)
            seen.add((k, v))
        for k, vals in by_key.items():
            tally.saw(k, np.array(vals, dtype=np.int64) if as_array else vals)
    wanted = set(acked) | set(bulk)
    started = time.monotonic()
    new = final_outcome(tally.acknowledged, tally.remaining, tally.missing(), 3, started, {0: 7})
    old = _old_outcome(wanted, seen)
    assert {k: new[k] for k in old} == old
    assert tally.remaining == len(wanted - seen)


def test_the_outcome_keeps_its_shape():
    out = final_outcome(5, 2, [[0, 11], [3, 4]], 9, time.monotonic(), {0: 12, 1: -1})
    assert set(out) == {
        "acknowledged", "read_acknowledged", "missing", "complete", "polls", "seconds",
        "high_watermarks",
    }  # fmt: skip
    assert out["read_acknowledged"] == 3 and out["complete"] is False and out["polls"] == 9
    assert out["missing"] == [[0, 11], [3, 4]]
    assert out["high_watermarks"] == {"0": 12, "1": -1}
    assert isinstance(out["seconds"], float)
    assert final_outcome(0, 0, [], 1, time.monotonic(), {})["complete"] is True


def test_at_most_fifty_missing_sends_are_named_in_key_then_value_order():
    sends = AckedSends()
    for v in range(100, 0, -1):
        sends.add(v % 2, v)
    missing = FinalTally(sends.wanted()).missing()
    assert len(missing) == 50 and missing == sorted(missing) and missing[0] == [0, 2]


def test_a_million_acknowledged_sends_take_megabytes_not_gigabytes():
    sends = AckedSends()
    n = 1_000_000
    sends.add_many(np.arange(n) % 8, np.arange(n) + 10**9)
    wanted = sends.wanted()
    tally = FinalTally(wanted)
    held = sum(w.nbytes for w in wanted.values()) + sum(h.nbytes for h in tally._hit.values())
    assert held == 9 * n


@settings(max_examples=100, deadline=None)
@given(
    wanted=st.dictionaries(
        st.integers(0, 4), st.lists(st.integers(-(2**62), 2**62), unique=True), max_size=5
    )
)
def test_the_wanted_file_holds_each_keys_sorted_values_in_key_order(tmp_path_factory, wanted):
    arrays = {k: np.array(sorted(v), dtype=np.int64) for k, v in wanted.items()}
    path = tmp_path_factory.mktemp("w") / "final.want"
    counts = write_wanted(path, arrays, 5)
    raw = np.fromfile(path, dtype="<i8")
    assert counts == [len(wanted.get(k, [])) for k in range(5)]
    at = 0
    for k in range(5):
        assert raw[at : at + counts[k]].tolist() == sorted(wanted.get(k, []))
        at += counts[k]
    assert at == len(raw)


def test_the_deadline_extends_while_records_are_read_and_no_further_than_its_most():
    d = ReadDeadline(started=100.0, timeout=10.0, window=5.0, most=30.0)
    assert not d.over(109.9)
    assert d.over(110.0)  # nothing ever read: the budget is the end
    d.progressed(108.0)
    assert not d.over(110.0) and not d.over(112.9)
    assert d.over(113.0)  # five seconds without a record
    for t in range(110, 140):
        d.progressed(float(t))
        assert not d.over(t + 0.5)
    d.progressed(140.0)
    assert d.over(140.0)  # 30 s past the budget, however fast it still reads


def test_a_gone_jvms_side_file_is_tallied_to_its_last_whole_poll(tmp_path: Path):
    from history.sidefiles import ELEMENT, OP, POLLS_TAG, SideWriter, poll_records

    path = tmp_path / "final.ops"
    w = SideWriter(path, POLLS_TAG)
    # (kind, type, a, b, c): an invoke, an ok poll of two records, an info, then a poll whose
    # op record never reached the file (its record read, dropped).
    rows = [
        (OP, 0, 1, 0, 4), (ELEMENT, 0, 0, 0, 11), (ELEMENT, 0, 2, 5, 9), (OP, 1, 2, 0, 4),
        (OP, 3, 3, 0, 4), (ELEMENT, 0, 1, 0, 8),
    ]  # fmt: skip
    r = poll_records(len(rows))
    for i, (kind, type_, a, b, c) in enumerate(rows):
        r[i]["kind"], r[i]["type"], r[i]["a"], r[i]["b"], r[i]["c"] = kind, type_, a, b, c
    w.write(r)
    w.close()
    tally = FinalTally({0: np.array([11, 12]), 1: np.array([8]), 2: np.array([9])})
    got = tally_side_file(path, tally)
    assert got == {
        "polls": 1, "ok": 1, "info": 1, "unread": 2, "missing": [[0, 12], [1, 8]], "highest": 4,
    }  # fmt: skip


@given(st.lists(st.integers(-(2**63), 2**63 - 1)))
def test_sorted_unique_is_numpys_unique(values):
    x = np.array(values, dtype=np.int64)
    assert sorted_unique(x).tolist() == np.unique(x).tolist()


class _Msg:
    def __init__(self, p: int, offset: int, value: bytes | None) -> None:
        self._p, self._o, self._v = p, offset, value

    def error(self) -> None:
        return None

    def value(self) -> bytes | None:
        return self._v

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class _Consumer:
    """librdkafka's consumer as the final reads use it: two partitions' logs, read in polls."""

    def __init__(self, conf: dict) -> None:
        self.logs = {0: [b"11", b"x", b"12"], 1: [None, b"13"]}
        self._polls = [
            [_Msg(0, 0, b"11"), _Msg(0, 1, b"x"), _Msg(1, 0, None)],
            [_Msg(1, 1, b"13"), _Msg(0, 2, b"12"), _Msg(0, 2, b"12")],
        ]
        self.at = {0: 0, 1: 0}

    def assign(self, partitions: list) -> None:
        pass

    def get_watermark_offsets(self, tp, timeout: float) -> tuple[int, int]:
        return 0, len(self.logs[tp.partition])

    def consume(self, n: int, timeout: float) -> list[_Msg]:
        got = self._polls.pop(0) if self._polls else []
        for m in got:
            self.at[m.partition()] = m.offset() + 1
        return got

    def position(self, tps: list) -> list:
        return [SimpleNamespace(partition=tp.partition, offset=self.at[tp.partition]) for tp in tps]

    def close(self) -> None:
        pass


def test_librdkafkas_final_reads_record_a_line_per_poll_and_tally_what_they_read(monkeypatch):
    """With a stand-in consumer (no broker): one invoke/ok pair per poll, records by key in the
    order read, and the reads stop once every
    acknowledged send was read and every position reached its end; values that are not the
    run's are kept in the poll's `unreadable` field."""
    monkeypatch.setattr(queue, "Consumer", _Consumer)
    acked = AckedSends()
    for k, v in [(0, 11), (0, 12), (1, 13)]:
        acked.add(k, v)
    wl = SimpleNamespace(consumer_conf=lambda group: {}, topic="t", keys=2, run_id="r", acked=acked)
    lines: list[tuple] = []
    ids = iter(range(7, 100))

    def record(*a, extra=None, **kw):
        lines.append((*a, extra) if extra else a)

    out = queue.final_reads(wl, lambda: next(ids), record, 60.0)
    assert lines == [
        ("invoke", "poll", [["poll"]], 7),
        # What is not one of the run's values is kept beside the poll (docs/history.md).
        (
            "ok",
            "poll",
            [["poll", {"0": [[0, 11]]}]],
            7,
            {"unreadable": [[0, 1, "value b'x'"], [1, 0, "no value"]]},
        ),
        ("invoke", "poll", [["poll"]], 7),
        ("ok", "poll", [["poll", {"1": [[1, 13]], "0": [[2, 12], [2, 12]]}]], 7),
        ("invoke", "poll", [["poll"]], 7),
        ("ok", "poll", [["poll", {}]], 7),
    ]
    assert out["complete"] is True and out["acknowledged"] == 3 and out["polls"] == 3
    assert out["high_watermarks"] == {"0": 3, "1": 2}
