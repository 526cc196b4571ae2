"""Names.rename over the explanations findings really write: every key and value id in its
Jepsen spelling, nothing else touched."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from checkers.families.cycles import REALTIME, WR, WW, DependencyGraph, OpInfo, _explain_step
from checkers.families.edges import Edge
from checkers.families.queue.elem import Elem
from checkers.families.queue.rules.fencing import fenced_producer_read
from checkers.families.queue.rules.internal_order import internal_pair
from checkers.families.queue.rules.offsets import duplicate, inconsistent_offsets
from checkers.families.queue.rules.process_order import process_pair
from checkers.families.queue.rules.reads import (
    g1a,
    garbage_read,
    lost_write,
    precommitted_read,
    unseen,
)
from history.errors import HistoryError
from history.names import Names
from history.reader import parse_history

# Keys 0 and 1 were :x and :y; values 0..3 were :a, :b, "c" and 12 (a history that mixes
# integers and names numbers them all, so an id never meets a real integer).
NAMES = Names({0: ":x", 1: ":y"}, {0: ":a", 1: ":b", 2: '"c"', 3: "12"})


def elem(index: int, value: int | None, offset: int | None, typ: str = "ok", process: str = "0"):
    return Elem(index, typ, process, 5_000_000_000, 0, "poll", offset, value, False)


@dataclass
class Log:
    """A key's version order: values at positions 0, 1, 2, ...
    (checkers.families.queue.order.LogView)."""

    key: int
    order: list[int]

    def pos(self, e: Elem) -> int | None:
        return self.order.index(e.value) if e.value in self.order else None

    def between(self, r1: int, r2: int) -> list[tuple[int, list[int]]]:
        return [(10 + r, [self.order[r]]) for r in range(r1 + 1, r2)]


def test_header_round_trip():
    header = {"kchaos_history": 1, "names": NAMES.to_header()}
    assert json.loads(json.dumps(header))["names"] == {
        "keys": {"0": ":x", "1": ":y"},
        "values": {"0": ":a", "1": ":b", "2": '"c"', "3": "12"},
    }
    assert Names.from_header(json.loads(json.dumps(header))) == NAMES
    assert NAMES.key(1) == ":y" and NAMES.key("1") == ":y" and NAMES.value(3) == "12"
    assert NAMES.key(7) == "7"  # an id it never gave stays as it is


def test_no_names_renames_nothing():
    names = Names.from_header({"kchaos_history": 1})
    assert not names and names.to_header() == {}
    assert names.rename("value 3 of key 0") == "value 3 of key 0"
    assert names.key(0) == "0" and names.value(None) == "None"


def test_only_keys_numbered():
    names = Names.from_header({"names": {"keys": {"0": ":x"}}})
    assert names.rename("op 3 polled value 2 from key 0") == "op 3 polled value 2 from key :x"


@pytest.mark.parametrize(
    "names",
    [[1], {"keys": [":x"]}, {"keys": {"x": ":x"}}, {"values": {"0": 7}}],
)
def test_malformed_names_in_a_header_are_one_error(names):
    header = json.dumps({"kchaos_history": 1, "names": names}).encode() + b"\n"
    with pytest.raises(HistoryError, match=r"h\.jsonl:1: names"):
        parse_history(header, "h.jsonl")


def test_describe_findings_renamed():
    a, c = elem(4, 0, 7), elem(9, 2, 9)
    texts = [
        inconsistent_offsets(0, 7, {0: [4], 1: [6, 8]}).explanation,
        duplicate(1, 3, [(2, [4]), (5, [9])]).explanation,
        garbage_read(0, a).explanation,
        precommitted_read(1, c).explanation,
        g1a(0, a, elem(2, 0, None, "fail")).explanation,
        lost_write(0, 1, elem(2, 1, 5), c, 5).explanation,
        lost_write(1, 2, elem(3, 2, None, "info"), c, 6).explanation,
        unseen(0, [a, c], [0, 2], c).explanation,
    ]
    assert [NAMES.rename(t) for t in texts] == [
        "offset 7 of key :x holds 2 different values: value :a (shown by op 4); "
        "value :b (shown by op 6, 8); a partition offset names exactly one record",
        "value 12 appears 2 times in key :y: offset 2 (op 4); offset 5 (op 9); "
        "it was sent once, so the partition holds a duplicate record",
        "op 4 polled value :a from key :x at offset 7, but no operation ever sent :a to key :x",
        'op 9 polled value "c" from key :y at offset 9, which it had sent itself in the same '
        "transaction: a read_committed consumer must never see a record before its "
        "transaction commits",
        "op 4 (ok at 5.000 s) polled value :a from key :x at offset 7, but the send of :a "
        "(op 2) failed: an aborted write must never be visible",
        "send of value :b to key :x was acknowledged at offset 5 (op 2, ok at 5.000 s), but no "
        "poll ever returned it although polls of key :x read up to offset 9 (op 9)",
        'send of value "c" to key :y was in op 3, which timed out (info) but another of its '
        "sends was polled, so it happened, at offset 6, but no poll ever returned it although "
        "polls of key :y read up to offset 9 (op 9)",
        "2 acknowledged send(s) to key :x were never returned by any poll, e.g. :a (op 4), "
        '"c" (op 9); polls of key :x read up to offset 9: either lost or no consumer caught '
        "up before the run ended",
    ]


def test_order_findings_renamed():
    log = Log(1, [0, 1, 2, 3])
    skip = internal_pair(log, "poll", elem(4, 0, 7), elem(4, 3, 12))
    back = process_pair(log, "send", elem(4, 2, 9), elem(6, 1, 8))
    assert skip is not None and back is not None
    assert NAMES.rename(skip.explanation) == (
        "op 4 polled key :y at offset 7 (value :a) and next at offset 12 (value 12), skipping "
        '2 record(s) in between: offsets 11 (value :b), 12 (value "c")'
    )
    assert NAMES.rename(back.explanation) == (
        'process 0: op 4 sent key :y up to offset 9 (value "c"); its next send of key :y, '
        "op 6, started at offset 8 (value :b), earlier in the log: a producer that kept its "
        "partition moves forward only"
    )


def test_fenced_producer_read_renamed():
    w, fence = elem(4, 1, 20, process="5"), elem(9, 3, 18, process="8")
    f = fenced_producer_read(0, 1, w, fence, [elem(11, 1, 20)], 3, "KIP-98")
    renamed = NAMES.rename(f.explanation)
    assert renamed.startswith("value :b of key :x, sent by process 5 (op 4, acknowledged)")
    assert "process 8 wrote value 12 in a committed transaction (op 9," in renamed
    assert "worker slot 2 (process mod 3)" in renamed  # not an id: left alone


def test_cycle_steps_renamed():
    ops = [OpInfo(i, str(i % 2), "ok", i, i + 10) for i in range(4)]
    edges = [Edge(WR, 0, 1, 1, 2), Edge(WW, 1, 2, 0, 3, 0)]
    graph = DependencyGraph(edges, ops)
    steps = [
        _explain_step(graph, 0, 1, {WR}),
        _explain_step(graph, 1, 2, {WW}),
        _explain_step(graph, 2, 3, {REALTIME}),
    ]
    assert [NAMES.rename(s) for s in steps] == [
        'op 0 sent value "c" to key :y, which op 1 polled (wr)',
        "op 1 sent value 12 to key :x, and op 2 sent :a, the next record of that partition (ww)",
        "op 2 completed at 0.000 s, before op 3 was invoked at 0.000 s (realtime)",
    ]


def test_only_ids_in_their_phrases_are_renamed():
    assert NAMES.rename("keys 0, 1 and 7; keys [1, 0]; values [0, 3]; data batch (values [1])") == (
        "keys :x, :y and 7; keys [:y, :x]; values [:a, 12]; data batch (values [:b])"
    )
    # Offsets, ops, processes, times, counts and numbers that merely follow the words stay.
    text = "op 1 at offset 0, 2 record(s), process 1, 1.000 s, key 1.5, value None, monkey 1"
    assert NAMES.rename(text) == text
