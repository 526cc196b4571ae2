"""Jepsen's Kafka history.edn read as a kchaos history, and checked by `kchaos check`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from checkers.api import check
from history.edn import read_edn_history
from history.errors import HistoryError

FIXTURE = Path(__file__).parent / "data" / "jepsen_kafka_history.edn"


def test_ops_keep_their_shape_in_kchaos_names():
    h = read_edn_history(FIXTURE)
    assert len(h.ops) == 18 and h.incomplete == []
    assert h.ops[3]["value"] == [["send", 3, [40, 15]]]
    assert h.ops[15]["value"] == [["poll", {"3": [[40, 15], [41, 16], [42, 17], [43, 19]],
                                            "4": [[7, 18]]}]]  # fmt: skip
    assert h.ops[9]["type"] == "info" and h.ops[9]["error"] == '["timeout"]'
    assert h.ops[17]["error"] == "not-leader-for-partition"
    # Jepsen's :info pairs of the nemesis become invoke + ok.
    assert [(o["type"], o["f"]) for o in h.ops if o["process"] == "nemesis"] == [
        ("invoke", "start-partition"), ("ok", "start-partition"),
        ("invoke", "stop-partition"), ("ok", "stop-partition"),
    ]  # fmt: skip
    assert h.ops[7]["value"] == ["isolated", {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}]


def test_kchaos_check_of_a_jepsen_history(tmp_path):
    edn = tmp_path / "history.edn"
    shutil.copy(FIXTURE, edn)
    verdict = check(edn, engine="pandas")
    # The info send of 17 was read at offset 42: it happened. Nothing is lost or reordered.
    assert verdict.status == "valid", verdict.summary()
    assert (tmp_path / "results.json").exists() and (tmp_path / "report.html").exists()
    assert "start-partition" not in verdict.summary()


def test_jepsen_lost_write_is_found(tmp_path):
    edn = tmp_path / "history.edn"
    edn.write_text(FIXTURE.read_text().replace("[41 16] [42 17]", "[42 17]"))
    verdict = check(edn, engine="pandas")
    # The poll jumps from offset 40 to 42 (int-poll-skip) and 16 is never read (lost-write);
    # as in Jepsen, an acknowledged send no poll returned is also unseen, and unseen fails.
    assert sorted(f.kind for f in verdict.failures) == ["int-poll-skip", "lost-write", "unseen"]
    lost = next(f for f in verdict.failures if f.kind == "lost-write")
    assert lost.ops == (5, 15)  # the send of 16, and the poll that read past it


def test_bad_edn_line_is_one_error(tmp_path):
    edn = tmp_path / "history.edn"
    edn.write_text(FIXTURE.read_text() + "{:type :ok, :f\n")
    with pytest.raises(HistoryError, match=r"history\.edn:19: not EDN"):
        read_edn_history(edn)


def test_jepsen_histories_get_jepsens_verdicts(tmp_path):
    """Jepsen tolerates G1c (ww dependencies inferred) and fails on unseen sends; kchaos's own
    histories keep kchaos's verdicts (docs/checkers.md, "kchaos and Jepsen")."""
    # Jepsen's g1c-pure-wr-test: each transaction sends one key and polls the other's send.
    ops = [
        "{:index 0 :type :invoke :f :txn :value [[:send :x 1] [:poll]] :process 0 :time 0}",
        "{:index 1 :type :invoke :f :txn :value [[:send :y 1] [:poll]] :process 1 :time 1}",
        "{:index 2 :type :ok :f :txn :value [[:send :x [0 1]] [:poll {:y [[0 1]]}]] :process 0"
        " :time 2}",
        "{:index 3 :type :ok :f :txn :value [[:send :y [0 1]] [:poll {:x [[0 1]]}]] :process 1"
        " :time 3}",
        "{:index 4 :type :invoke :f :send :value [[:send :z 7]] :process 2 :time 4}",
        "{:index 5 :type :ok :f :send :value [[:send :z [0 7]]] :process 2 :time 5}",
    ]
    edn = tmp_path / "history.edn"
    edn.write_text("\n".join(ops) + "\n")
    verdict = check(edn, engine="local")
    g1c = [f for f in verdict.findings if f.kind == "G1c"]
    assert g1c and all("allowed-error-types" in (f.tolerated or "") for f in g1c)
    (unseen,) = [f for f in verdict.failures if f.kind == "unseen"]
    # Said back in Jepsen's own names.
    assert "key :z" in unseen.explanation and "7 (op 5)" in unseen.explanation
    assert verdict.status == "invalid"
