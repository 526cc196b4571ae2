"""Jepsen's Kafka histories, in the shapes Jepsen's own tests write them, as kchaos histories.

The histories are jepsen/test/jepsen/tests/kafka_test.clj's. Where a test builds its ops with
its helper `(o index process type f value)`, they are written out as the map that helper makes,
`{:index index, :time index, :process process, :type type, :f f, :value value}`; the
realtime-lag test's own `o` makes `{:time time, :process process, :type type, :f f, :value
value}`. Every converted history must then read (parse_history) and turn columnar (to_table)
without error.
"""

from __future__ import annotations

import json

import pytest

from checkers.api import check
from checkers.table_check import check_table
from history.columnar import to_table
from history.edn import NIL_PROCESS, POSITION_NS, convert_edn_text, read_edn_history
from history.errors import HistoryError
from history.names import Names
from history.reader import History, parse_history

# version-orders-test: only completions, no :process, :time or :index.
VERSION_ORDERS = """
[; Read [a b] at offset 0 and 1
 {:type :ok, :f :txn, :value [[:poll {:x [[0 :a] [1 :b]]}]]}
 ; But write c at offset 1, b at offset 3, and d at offset 4.
 {:type :info, :f :txn, :value [[:send :x [1 :c]]
                                [:send :x [3 :b]]
                                [:send :x [4 :d]]]}]
"""

# version-orders-test, "a real-world example": integers, :time and :process, no :index.
REAL_WORLD = """
[{:type :invoke, :f :send, :value [[:send 11 641]], :time 280153467070, :process 379}
 {:type :ok, :f :send, :value [[:send 11 [537 641]]], :time 280169754615, :process 379}
 {:type :invoke, :f :send, :value [[:send 11 645]], :time 283654729962, :process 363}
 {:type :ok, :f :send, :value [[:send 11 [537 645]]], :time 287474569112, :process 363}
 ]
"""

# lost-write-test, "consistent".
LOST_WRITE = """
{:index 0, :time 0, :process 0, :type :invoke, :f :send, :value [[:send :x :a]]}
{:index 1, :time 1, :process 0, :type :ok, :f :send, :value [[:send :x [0 :a]]]}
{:index 2, :time 2, :process 0, :type :invoke, :f :send, :value [[:send :x :b] [:send :x :d]]}
{:index 3, :time 3, :process 0, :type :ok, :f :send, :value [[:send :x [1 :b]] [:send :x [3 :d]]]}
{:index 4, :time 4, :process 1, :type :invoke, :f :send, :value [[:send :x :c]]}
{:index 5, :time 5, :process 1, :type :info, :f :send, :value [[:send :x :c]]}
{:index 6, :time 6, :process 0, :type :invoke, :f :poll, :value [[:poll]]}
{:index 7, :time 7, :process 0, :type :ok, :f :poll, :value [[:poll {:x [[2 :c]]}]]}
"""

# int-nonmonotonic-send-test: integer and keyword values in one history (its send-31a).
MIXED_VALUES = """
[{:index 0, :time 0, :process 0, :type :invoke, :f :send, :value [[:send :x 3] [:send :x 1]]}
 {:index 1, :time 1, :process 0, :type :ok, :f :send,
  :value [[:send :x [3 :c]] [:send :x [1 :a]]]}
 {:index 2, :time 2, :process 0, :type :invoke, :f :send, :value [[:send :y :d] [:send :y :b]]}
 {:index 3, :time 3, :process 0, :type :info, :f :send, :value [[:send :y :d] [:send :y :b]]}]
"""

# g1a-test: keyword keys, integer values.
G1A = """
[{:index 0, :time 0, :process 0, :type :invoke, :f :send, :value [[:send :x 2] [:send :y 3]]}
 {:index 1, :time 1, :process 0, :type :fail, :f :send, :value [[:send :x 2] [:send :y 3]]}
 {:index 2, :time 2, :process 1, :type :invoke, :f :poll, :value [[:poll]]}
 {:index 3, :time 3, :process 1, :type :ok, :f :poll, :value [[:poll {:x [[0 2]]}]]}]
"""

# realtime-lag-test ("up to date"), its first twelve ops: assigns, empty polls, no :index.
REALTIME_LAG = """
[{:time 0, :process 0, :type :invoke, :f :assign, :value [:x]}
 {:time 1, :process 0, :type :ok, :f :assign, :value [:x]}
 {:time 2, :process 0, :type :invoke, :f :poll, :value [[:poll]]}
 {:time 3, :process 0, :type :ok, :f :poll, :value [[:poll {:x []}]]}
 {:time 4, :process 0, :type :invoke, :f :send, :value [[:send :x :a]]}
 {:time 5, :process 0, :type :ok, :f :send, :value [[:send :x [0 :a]]]}
 {:time 10, :process 0, :type :invoke, :f :poll, :value [[:poll]]}
 {:time 11, :process 0, :type :ok, :f :poll, :value [[:poll]]}
 {:time 14, :process 0, :type :invoke, :f :assign, :value [:x :y]}
 {:time 15, :process 0, :type :ok, :f :assign, :value [:x :y]}
 {:time 16, :process 0, :type :invoke, :f :poll, :value [[:poll]]}
 {:time 17, :process 0, :type :ok, :f :poll, :value [[:poll {}]]}]
"""

# poll-skip-test, "txn abort", "good": two ops at time 1 (its helper's index), one completing
# as the other is invoked: :time does not rise, history order still says which came first.
TXN_ABORT = """
[{:index 0, :time 0, :process 0, :type :invoke, :f :send,
  :value [[:send :x 0] [:send :x 1] [:send :x 2]]}
 {:index 1, :time 1, :process 0, :type :ok, :f :send,
  :value [[:send :x [0 0]] [:send :x [1 1]] [:send :x [2 2]]]}
 {:index 1, :time 1, :process 1, :type :invoke, :f :txn, :value [[:poll]]}
 {:index 2, :time 2, :process 1, :type :ok, :f :txn, :value [[:poll {:x [[0 0]]}]]}
 {:index 3, :time 3, :process 1, :type :invoke, :f :txn, :value [[:poll]]}
 {:index 4, :time 4, :process 1, :type :fail, :f :txn, :value [[:poll {:x [[1 1] [2 2]]}]]}]
"""


def convert(text: str) -> tuple[History, Names]:
    """The converted history, read back as kchaos reads any, and its names."""
    converted = convert_edn_text(text, "history.edn")
    history = parse_history(converted.jsonl(), "history.jsonl")
    to_table(history)  # every queue element fits the columnar form
    return history, Names.from_header(history.header)


def shape(history: History) -> list[tuple]:
    return [(o["type"], o["f"], o["process"], o["value"]) for o in history.ops]


def test_completions_without_process_time_or_invocation():
    h, names = convert(VERSION_ORDERS)
    assert names == Names({0: ":x"}, {0: ":a", 1: ":b", 2: ":c", 3: ":d"})
    assert h.header["names"] == {
        "keys": {"0": ":x"},
        "values": {"0": ":a", "1": ":b", "2": ":c", "3": ":d"},
    }
    # Each completion gets an invocation of its arguments just before it, on the one process
    # Jepsen would group ops without :process in.
    assert shape(h) == [
        ("invoke", "txn", NIL_PROCESS, [["poll"]]),
        ("ok", "txn", NIL_PROCESS, [["poll", {"0": [[0, 0], [1, 1]]}]]),
        ("invoke", "txn", NIL_PROCESS, [["send", 0, 2], ["send", 0, 1], ["send", 0, 3]]),
        ("info", "txn", NIL_PROCESS,
         [["send", 0, [1, 2]], ["send", 0, [3, 1]], ["send", 0, [4, 3]]]),
    ]  # fmt: skip
    assert h.invoke_of == {1: 0, 3: 2} and h.incomplete == []
    assert h.header["invocations_added"] == 2
    # No :time: every op's time is its position; an added invocation gets the earliest time,
    # so that no op completed before it (Elle links nothing to an op without invocation).
    assert h.header["time_from"] == "index"
    assert h.header["time_from_reason"] == "2 of 2 ops have no :time (first: line 3)"
    assert [o["time"] for o in h.ops] == [POSITION_NS, POSITION_NS, POSITION_NS, 3 * POSITION_NS]
    assert any("op times are op positions" in n for n in h.notes())
    assert any("2 completion(s) had no invocation" in n for n in h.notes())


def test_integers_stay_as_they_are():
    h, names = convert(REAL_WORLD)
    assert not names and "names" not in h.header
    assert "time_from" not in h.header and "invocations_added" not in h.header
    assert shape(h) == [
        ("invoke", "send", 379, [["send", 11, 641]]),
        ("ok", "send", 379, [["send", 11, [537, 641]]]),
        ("invoke", "send", 363, [["send", 11, 645]]),
        ("ok", "send", 363, [["send", 11, [537, 645]]]),
    ]
    assert [o["time"] for o in h.ops] == [280153467070, 280169754615, 283654729962, 287474569112]
    assert h.notes() == []


def test_keyword_keys_and_values_in_order_of_first_appearance():
    h, names = convert(LOST_WRITE)
    assert names.keys == {0: ":x"}
    assert names.values == {0: ":a", 1: ":b", 2: ":d", 3: ":c"}
    assert h.ops[3]["value"] == [["send", 0, [1, 1]], ["send", 0, [3, 2]]]
    assert h.ops[7]["value"] == [["poll", {"0": [[2, 3]]}]]
    assert [o["time"] for o in h.ops] == list(range(8))  # Jepsen's times, rising: kept


def test_integer_values_beside_names_are_numbered_too():
    h, names = convert(MIXED_VALUES)
    # 3 and 1 are numbered with the keywords: an id never meets a real integer.
    assert names.values == {0: "3", 1: "1", 2: ":c", 3: ":a", 4: ":d", 5: ":b"}
    assert names.keys == {0: ":x", 1: ":y"}
    assert h.ops[0]["value"] == [["send", 0, 0], ["send", 0, 1]]
    assert h.ops[1]["value"] == [["send", 0, [3, 2]], ["send", 0, [1, 3]]]
    assert h.ops[3]["value"] == [["send", 1, 4], ["send", 1, 5]]


def test_keyword_keys_with_integer_values():
    h, _ = convert(G1A)
    assert h.header["names"] == {"keys": {"0": ":x", "1": ":y"}}
    assert h.ops[0]["value"] == [["send", 0, 2], ["send", 1, 3]]
    assert h.ops[3]["value"] == [["poll", {"0": [[0, 2]]}]]


def test_assign_values_are_keys():
    h, names = convert(REALTIME_LAG)
    assert names.keys == {0: ":x", 1: ":y"} and names.values == {0: ":a"}
    assert h.ops[1]["value"] == [0] and h.ops[9]["value"] == [0, 1]
    assert [o["value"] for o in h.ops if o["f"] == "poll" and o["type"] == "ok"] == [
        [["poll", {"0": []}]],
        [["poll"]],
        [["poll", {}]],
    ]
    assert "time_from" not in h.header


def test_times_that_do_not_rise_become_positions():
    h, _ = convert(TXN_ABORT)
    assert h.header["time_from"] == "index"
    assert h.header["time_from_reason"] == ":time does not rise at line 6 (1 after 1)"
    assert [o["time"] for o in h.ops] == [i * POSITION_NS for i in range(6)]
    assert h.header["names"] == {"keys": {"0": ":x"}}  # its values are integers


def test_time_minus_one_is_no_time():
    # jepsen.history gives an op made without :time the time -1, and writes it so.
    text = REAL_WORLD.replace(":time 280153467070", ":time -1")
    h, _ = convert(text)
    assert h.header["time_from_reason"] == "1 of 4 ops have no :time (first: line 2)"
    assert [o["time"] for o in h.ops] == [i * POSITION_NS for i in range(4)]


def test_completion_without_invocation_on_a_client_process():
    text = """
{:type :invoke, :f :send, :value [[:send 1 10]], :process 0, :time 100}
{:type :ok, :f :send, :value [[:send 1 [0 10]]], :process 0, :time 200}
{:type :ok, :f :poll, :value [[:poll {1 [[0 10]]}]], :process 0, :time 300}
{:type :fail, :f :send, :value [[:send 1 11]], :process 3, :time 400, :error :timeout}
"""
    h, _ = convert(text)
    assert shape(h) == [
        ("invoke", "send", 0, [["send", 1, 10]]),
        ("ok", "send", 0, [["send", 1, [0, 10]]]),
        ("invoke", "poll", 0, [["poll"]]),
        ("ok", "poll", 0, [["poll", {"1": [[0, 10]]}]]),
        ("invoke", "send", 3, [["send", 1, 11]]),
        ("fail", "send", 3, [["send", 1, 11]]),
    ]
    # Times kept; each added invocation at the earliest, before which nothing completed.
    assert [o["time"] for o in h.ops] == [100, 200, 100, 300, 100, 400]
    assert "error" not in h.ops[4] and h.ops[5]["error"] == "timeout"


def test_rebalance_log_keys_are_numbered():
    text = """
{:type :invoke, :f :poll, :value [[:poll]], :process 0, :time 1}
{:type :ok, :f :poll, :value [[:poll {:x [[0 :a]]}]], :process 0, :time 2,
 :rebalance-log [{:keys [:y :x]}]}
"""
    h, names = convert(text)
    assert names.keys == {0: ":x", 1: ":y"}
    assert h.ops[1]["rebalance_log"] == [{"keys": [1, 0]}]


def test_other_spellings_are_numbered_by_their_edn_spelling():
    text = """[{:type :ok, :f :send, :process 0, :time 1,
               :value [[:send "x" [0 "a"]] [:send :x [1 :a]]
                       [:send "x" [2 1.5]] [:send :x [3 nil]]]}]"""
    h, names = convert(text)
    assert names.keys == {0: '"x"', 1: ":x"}
    assert names.values == {0: '"a"', 1: ":a", 2: "1.5"}  # nil: a value not known, not named
    assert h.ops[1]["value"] == [
        ["send", 0, [0, 0]],
        ["send", 1, [1, 1]],
        ["send", 0, [2, 2]],
        ["send", 1, [3, None]],
    ]


def test_ops_laid_out_over_lines_without_a_vector():
    text = VERSION_ORDERS.strip()[1:-1]  # the ops alone, as a sequence of maps
    h, _ = convert(text)
    assert len(h.ops) == 4


ERRORS = [
    # (EDN, line, message)
    ("{:type :ok, :f :poll, :value [[:poll]], :process 0, :time 1}\n[1 2]", 2,
     "expected an op map, found [1 2]"),
    ("{:f :send, :value [[:send :x 1]], :process 0}", 1, "op has no :type"),
    ("{:type :pending, :f :send, :value [], :process 0}", 1, ":type :pending is not one of"),
    ("{:type :ok, :value [], :process 0}", 1, "op has no :f"),
    ("{:type :ok, :f 7, :value [], :process 0}", 1, ":f 7 is not a keyword"),
    ("{:type :ok, :f :send, :value [], :process 1.5}", 1,
     ":process 1.5 is not an integer or a keyword"),
    ('{:type :ok, :f :send, :value [], :process 0, :time "now"}', 1,
     ':time "now" is not an integer'),
    ("{:type :invoke, :f :send, :value [[:send :x 1]]}", 1, "invocation without :process"),
    ("{:type :invoke, :f :send, :value [[:send :x 1]], :process 0}\n"
     "{:type :invoke, :f :poll, :value [[:poll]], :process 0}", 2,
     "process 0 invokes again while its op at line 1 is still running"),
    ("{:type :invoke, :f :send, :value [[:send :x 1]], :process 0}\n\n"
     "{:type :ok, :f :poll, :value [[:poll]], :process 0}", 3,
     ":ok :poll of process 0 completes an invocation of :send (line 1)"),
    ("{:type :ok, :f :send, :value :x, :process 0}", 1,
     ":send value :x is not a vector of micro-operations"),
    ("{:type :ok, :f :send, :value [[:send :x]], :process 0}", 1,
     "send micro-op [:send :x] is not [:send key value]"),
    ("{:type :ok, :f :send, :value [[:send :x [:o :a]]], :process 0}", 1,
     "send result [:o :a] is not [offset value]"),
    ("{:type :ok, :f :poll, :value [[:poll [1 2]]], :process 0}", 1,
     "poll micro-op [:poll [1 2]] is not [:poll {key [[offset value] ...]}]"),
    ("{:type :ok, :f :poll, :value [[:poll {:x [[0 :a 1]]}]], :process 0}", 1,
     "poll of key :x returned [0 :a 1], not [offset value]"),
    ("{:type :ok, :f :txn, :value [[:append :x 1]], :process 0}", 1,
     "micro-op [:append :x 1] is neither [:send key value] nor [:poll]"),
    ("{:type :ok, :f :poll, :value [], :process 0, :rebalance-log :x}", 1,
     ":rebalance-log :x is not a vector of {:keys [...]}"),
    ("[{:type :ok, :f :poll, :value [], :process 0}\n {:type :ok, :f :poll\n\n  :value}]", 2,
     "not EDN"),
    ("{:type :ok, :f :poll, :value [], :process 0}}\n", 1, "not EDN (unbalanced '}')"),
    ("{:type :ok, :f :poll, :value [], :process 0}\n{:type :ok, :f", 2, "not EDN"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "message"), ERRORS)
def test_malformed_ops_are_one_error_naming_the_line(tmp_path, text, line, message):
    path = tmp_path / "history.edn"
    path.write_text(text)
    with pytest.raises(HistoryError) as e:
        read_edn_history(path)
    assert e.value.line == line, str(e.value)
    assert message in e.value.message
    assert str(e.value).startswith(f"{path}:{line}: ")


def test_a_form_the_scanner_cannot_cut_is_read_whole():
    # #_ discards the next form: the ops are read at once, and errors name the op instead.
    text = "[#_ {:ignored 1}\n {:type :ok, :f :poll, :value [[:poll]]}\n {:f :poll}]"
    with pytest.raises(HistoryError, match=r"history\.edn: op 1 of the history: op has no :type"):
        convert_edn_text(text, "history.edn")


def test_reader_errors_name_the_edn_line(tmp_path):
    # Only the reader sees this clash: a process Jepsen named :nil is running when a
    # completion without :process, which runs on the process named nil, needs an invocation.
    path = tmp_path / "history.edn"
    path.write_text(
        "{:type :invoke, :f :poll, :value [[:poll]], :process :nil, :time 1}\n"
        "{:type :ok, :f :poll, :value [[:poll]], :time 2}\n"
    )
    with pytest.raises(HistoryError) as e:
        read_edn_history(path)
    assert e.value.line == 2 and "invokes again" in e.value.message


def test_check_reports_in_jepsen_names_after_rename(tmp_path):
    # lost-write-test: Jepsen finds :a and :b lost (the poll of :c at offset 2 passed them).
    h, names = convert(LOST_WRITE)
    lost = [f for f in check_table(to_table(h)) if f.kind == "lost-write"]
    assert [names.rename(f.explanation).split(" was ")[0] for f in lost] == [
        "send of value :a to key :x",
        "send of value :b to key :x",
    ]


def test_kchaos_check_of_a_jepsen_test_history(tmp_path):
    edn = tmp_path / "history.edn"
    edn.write_text(VERSION_ORDERS)
    verdict = check(edn, engine="pandas")
    header = json.loads((tmp_path / "history.jsonl").read_text().splitlines()[0])
    assert header["names"]["values"] == {"0": ":a", "1": ":b", "2": ":c", "3": ":d"}
    assert any("numbered in order of first appearance" in n for n in verdict.notes)
    # Offset 1 holds :b and :c: the finding Jepsen's test expects, in ids until renamed.
    found = [f for f in verdict.findings if f.kind == "inconsistent-offsets"]
    assert [Names.from_header(header).rename(f.explanation).split(": value")[0] for f in found] == [
        "offset 1 of key :x holds 2 different values"
    ]
