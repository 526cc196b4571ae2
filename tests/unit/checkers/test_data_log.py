"""Data-log rules: fenced producers' writes and commits, and exact attribution of acknowledged
sends to the leader that appended them (lease violations). Each rule has a case that must fire
and near misses that must not."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.data_log.check import DataLogRead, check_data_logs, check_run_data
from checkers.families.data_log.fencing import stale_producer_writes
from checkers.families.data_log.log import is_value_text
from checkers.families.data_log.parse import DataLogError, parse_data_log, read_data_logs
from checkers.families.metadata_log.check import check_logs
from checkers.families.metadata_log.parse import parse_metadata_log
from tests.unit.checkers import datalogs, metalogs
from tests.unit.checkers.datalogs import B, dump
from tests.unit.checkers.metalogs import BASE_MS, CLUSTER, healthy, rec

DATA = Path(__file__).parent / "data"
T = "cLeQx89bSOu6lgtiqv6AmA"  # topic "t" of metalogs.healthy()


def logs(**parts):
    return {n: parse_data_log(dump(p), n) for n, p in parts.items()}


def kinds(findings):
    return sorted(f.kind for f in findings)


# Parsing ---------------------------------------------------------------------------------------
def test_real_excerpt_parses():
    log = parse_data_log((DATA / "data_n1_excerpt.txt").read_text(), "n1")
    assert log.topic == "kchaos-queue" and log.partitions[0] == [] and log.notes == []
    b0, b1, commit = log.partitions[3][:3]
    assert (b0.producer_id, b0.producer_epoch, b0.leader_epoch) == (1000, 0, 0)
    assert b0.payloads == {0: "6000001"} and b1.payloads == {1: "5000001"}
    assert commit.control and commit.marker == "COMMIT" and commit.base == 2
    assert log.batch_at(3, 1) is b1 and log.batch_at(3, 9) is None


def test_truncated_file_drops_only_the_cut_batch_and_says_so():
    text = dump({0: [B(7, 0, values=(1,)), B(7, 0, values=(2, 3))]})
    cut = text[: text.rindex("payload: 3") - 40]  # mid-line inside the last batch
    log = parse_data_log(cut, "n1")
    assert [b.base for b in log.partitions[0]] == [0]
    assert any("cut short" in n for n in log.notes) and any("truncated" in n for n in log.notes)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.text(alphabet="0123456789-ab", min_size=1, max_size=6)),
        min_size=1,
        max_size=30,
    )
)
def test_a_batchs_payloads_answer_as_a_dict_of_its_record_lines(records):
    """Whatever the record lines (repeated or descending offsets, payloads that are no value),
    the batch's payloads are the dict of them, the last one read winning."""
    lines = [
        "Dumping t-0/00000000000000000000.log",
        datalogs.BATCH.format(b=0, l=40, n=41, p=7, pe=0, le=0, c="false", s=0, ls=40, t="false"),
        *(datalogs.DATA.format(o=o, k=0, v=v) for o, v in records),
        *(datalogs.DATA.format(o=o, k=0, v=1) for o in range(41) if o not in dict(records)),
    ]
    log = parse_data_log("\n".join(lines) + "\n", "n1")
    expected = {o: str(1) for o in range(41)} | dict(records)
    [batch] = log.partitions[0]
    assert dict(batch.payloads.items()) == expected and len(batch.payloads) == 41
    for o in range(-2, 45):
        assert batch.payloads.get(o) == expected.get(o)
    # The payloads that are values are the batch's value array; the rest are flagged.
    assert batch.values() == [int(v) for _, v in sorted(expected.items()) if is_value_text(v)]
    assert sorted(log.odd.values()) == sorted(v for v in expected.values() if not is_value_text(v))


@pytest.mark.parametrize("cut", [0, 1, 40, 200, None])
def test_a_log_read_from_its_file_a_line_at_a_time_is_the_log_of_its_text(tmp_path, cut):
    text = dump({0: [B(7, 0, values=(1,)), B(7, 0, values=(2, 3))], 2: [B(8, 1, values=(4,))]})
    if cut is not None:
        text = text[: len(text) - cut]
    (tmp_path / "n1.txt").write_text(text)
    whole = parse_data_log(text, "n1", tmp_path / "n1.txt")
    streamed = read_data_logs(tmp_path)["n1"]
    assert streamed.notes == whole.notes and streamed.topic == whole.topic
    assert streamed.batches.tobytes() == whole.batches.tobytes()
    assert list(streamed.offsets) == list(whole.offsets)
    assert list(streamed.values) == list(whole.values)
    assert {
        p: [(b.cite(), dict(b.payloads)) for b in bs] for p, bs in streamed.partitions.items()
    } == {p: [(b.cite(), dict(b.payloads)) for b in bs] for p, bs in whole.partitions.items()}


def test_odd_line_is_one_clear_error():
    text = dump({0: [B(7, 0, values=(1,))]}).replace("| offset: 0", "|| junk 0")
    with pytest.raises(DataLogError, match=r"n1\.txt:\d+: not a DumpLogSegments line"):
        parse_data_log(text, "n1")


def test_unreadable_log_is_unknown_not_invalid(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "n1.txt").write_text("Dumping nonsense\n")
    result = check_run_data(tmp_path, [])
    assert [f.kind for f in result.findings] == ["data-log-unreadable"]
    assert result.findings[0].unknown and "n1.txt:1" in result.findings[0].explanation


# Fenced producers ------------------------------------------------------------------------------
def test_zombie_commit_after_the_new_epoch_is_found():
    # P=7: the zombie wrote in epoch 0; the slot's next producer (epoch 1) wrote; then the
    # zombie's COMMIT (epoch 0) was appended.
    p = [B(7, 0, values=(10,)), B(7, 1, values=(20,)), B(7, 0, marker="COMMIT")]
    [f] = stale_producer_writes(logs(n1={0: p}, n2={0: p}), {10: 3, 20: 5})
    assert f.kind == "fenced-producer-commit" and f.key == 0
    assert "producerEpoch 0" in f.explanation and "follows its epoch 1" in f.explanation
    assert "n1, n2" in f.explanation and "KIP-98" in f.explanation
    assert f.data["batches"][0].startswith("data/n1.txt:5 t-0 offsets 1..1 producerId 7")
    assert len(f.data["batches"]) == 3  # the newer batch, then the stale marker on each broker


def test_stale_data_batch_names_the_ops_it_holds():
    p = [B(7, 1, values=(20,)), B(7, 0, values=(10, 11))]
    [f] = stale_producer_writes(logs(n1={2: p}), {10: 3, 11: 3, 20: 5})
    assert (
        f.kind == "fenced-producer-write" and f.ops == (3,) and "values [10, 11]" in f.explanation
    )


@pytest.mark.parametrize(
    "batches",
    [
        # a new producer instance bumps the epoch, then commits its own transactions
        [
            B(7, 0, values=(1,)),
            B(7, 0, marker="COMMIT"),
            B(7, 1, values=(2,)),
            B(7, 1, marker="COMMIT"),
        ],
        # KIP-890 (transaction version 2): the marker carries the bumped epoch, data follows it
        [
            B(7, 0, values=(1,)),
            B(7, 1, marker="COMMIT"),
            B(7, 1, values=(2,)),
            B(7, 2, marker="ABORT"),
        ],
        # the zombie's transaction aborted by the coordinator; a stale ABORT hides nothing
        [B(7, 0, values=(1,)), B(7, 1, values=(2,)), B(7, 0, marker="ABORT")],
        # a coordinator retry writes the same epoch's COMMIT twice (seen in a real run)
        [B(7, 0, values=(1,)), B(7, 0, marker="COMMIT"), B(7, 0, marker="COMMIT")],
        # other producers' epochs are their own
        [B(7, 3, values=(1,)), B(8, 0, values=(2,)), B(8, 0, marker="COMMIT")],
        # no idempotence: no producer id, no epoch
        [B(-1, -1, values=(1,)), B(-1, -1, values=(2,))],
    ],
)
def test_near_misses(batches):
    assert stale_producer_writes(logs(n1={0: batches})) == []


def test_a_lagging_follower_is_not_a_zombie():
    full = [B(7, 0, values=(1,)), B(7, 0, marker="COMMIT"), B(7, 1, values=(2,))]
    assert stale_producer_writes(logs(n1={0: full}, n2={0: full[:1]}, n3={0: []})) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([7, 8]), st.booleans(), st.booleans()), max_size=30))
def test_nondecreasing_epochs_never_alarm_and_one_stale_commit_always_does(steps):
    epochs = {7: 0, 8: 0}
    batches = []
    for pid, bump, commit in steps:
        epochs[pid] += bump
        marker = ("COMMIT" if commit else "ABORT") if bump else None
        batches.append(B(pid, epochs[pid], values=() if marker else (1,), marker=marker))
    batches = [b if b.marker or b.values else B(b.pid, b.pepoch, values=(1,)) for b in batches]
    assert stale_producer_writes(logs(n1={0: batches})) == []
    if epochs[7] > 0:
        stale = [*batches, B(7, epochs[7] - 1, marker="COMMIT")]
        assert kinds(stale_producer_writes(logs(n1={0: stale}))) == ["fenced-producer-commit"]


# Lease violations, attributed through the data logs --------------------------------------------
FENCE = rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=1, brokerEpoch=2, fenced=1)


def _lease(batch_epoch, node, extra=(), value=5, offset=0, after_ms=5_500, data=None,
           corroborated=frozenset()):  # fmt: skip
    """Broker 1 (n1) leads t-0 in epoch 0 (healthy()); `extra` metadata records come next, then
    the fence. One ok send of `value` at `offset`, invoked `after_ms` after the fence."""
    h = [*healthy(), *[(2, r) for r in extra], (2, FENCE), (2, rec("NO_OP_RECORD"))]
    meta = {n: parse_metadata_log(metalogs.dump(h), n) for n in ("n1", "n2")}
    fence_ms = BASE_MS + 100 * (len(h) - 2)
    inv = (fence_ms + after_ms) / 1000
    send = {
        "index": 7, "f": "send", "type": "ok", "node": node, "invoke_wall": inv,
        "wall": inv + 0.05, "value": [["send", 0, [offset, value]]],
    }  # fmt: skip
    data = data or logs(n2={0: [B(9, 0, lepoch=batch_epoch, values=(5,))]})
    return check_logs(
        meta, CLUSTER, sends=[send], data_logs=data, corroborated_ops=set(corroborated)
    )


def test_a_fenced_leader_appending_an_acknowledged_send_is_a_definite_finding():
    # The leader map named n2: only the data log shows that n1 (broker 1) appended it.
    result = _lease(0, "n2")
    [f] = result.findings
    assert f.kind == "lease-violation" and not f.unknown and f.ops == (7,)
    # The write survived and nothing else is wrong with it: reported, tolerated, and why.
    assert f.tolerated is not None and "do not expire their own lease" in f.tolerated
    [g] = _lease(0, "n2", corroborated={7}).findings
    assert g.tolerated is None and g.explanation == f.explanation
    assert "broker 1 appended as leader in epoch 0" in f.explanation and "KIP-631" in f.explanation
    fence, batch, leader = f.data["records"]
    assert "BROKER_REGISTRATION_CHANGE_RECORD" in fence
    assert batch.startswith("data/n2.txt:3 t-0 offsets 0..0") and "PARTITION_RECORD" in leader
    assert any("1 acknowledged send/txn ops attributed" in n for n in result.notes)


def test_the_next_leader_appending_is_no_violation_even_if_the_leader_map_named_the_fenced_one():
    change = rec("PARTITION_CHANGE_RECORD", partitionId=0, topicId=T, leader=2, isr=[2])
    result = _lease(1, "n1", extra=[change])
    assert result.findings == [] and not any(n.startswith("lease") for n in result.notes)


def test_a_change_record_without_leader_does_not_start_an_epoch():
    isr_only = rec("PARTITION_CHANGE_RECORD", partitionId=0, topicId=T, isr=[1])
    [f] = _lease(0, "n2", extra=[isr_only]).findings
    assert f.kind == "lease-violation"
    result = _lease(1, "n2", extra=[isr_only])  # epoch 1 was never started: not attributed
    assert result.findings == [] and any("not attributed" in n for n in result.notes)


def test_a_send_found_in_no_final_log_falls_back_to_a_note():
    # Offset 0 holds another value: the acknowledged write was truncated away (a lost write,
    # the queue checker's business); the leader map's n1 makes it only a suspect.
    result = _lease(0, "n1", value=6)
    assert result.findings == []
    assert any("lease: 1 acknowledged sends (ops 7)" in n for n in result.notes)


def test_copies_in_different_leader_epochs_are_not_attributed():
    data = logs(n2={0: [B(9, 0, lepoch=0, values=(5,))]}, n3={0: [B(9, 0, lepoch=1, values=(5,))]})
    result = _lease(0, "n2", data=data)
    assert result.findings == [] and any("not attributed" in n for n in result.notes)


def test_within_timeout_and_tolerance_is_no_violation():
    assert _lease(0, "n2", after_ms=4_900).findings == []


# Acknowledged at an offset that holds another write ---------------------------------------------
def _send(index, process, key, value, offset=None, type_="ok", f="send"):
    """An op row as the checkers read them: a completion names its invocation, one before."""
    ov = [offset, value] if type_ == "ok" else value
    invoked = None if type_ == "invoke" else index - 1
    return {"index": index, "type": type_, "f": f, "process": process, "invoke_index": invoked,
            "value": [["send", key, ov]]}  # fmt: skip


# A real 4.1.2 run (--txn, kill nemesis, seed 21): process 2's transaction with value 2000079 on
# key 5 was appended at offset 1 here (84 there) and aborted while the partition's leader was
# killed; 2000113, sent later by the same process and producer session, was acknowledged at
# that same offset, and no final log holds it.
REUSED = [
    B(1000, 0, values=(1000060,)),
    B(1000, 0, values=(2000079,)),
    B(1000, 0, marker="ABORT"),
    B(2, 1, values=(1000067,)),
]


def _reused_rows():
    return [
        _send(10, 2, 5, 2000079, type_="invoke", f="txn"),
        _send(11, 2, 5, 2000079, type_="fail", f="txn"),
        _send(20, 2, 5, 2000113, type_="invoke"),
        _send(21, 2, 5, 2000113, offset=1),
    ]


def test_an_ack_naming_another_writes_offset_is_a_loss_explained_by_the_batch_there():
    rows = _reused_rows()
    result = check_data_logs(DataLogRead(logs(n1={5: REUSED}, n2={5: REUSED})), rows)
    [f] = [f for f in result.findings if f.kind == "acked-offset-holds-other-write"]
    assert f.key == 5 and f.ops == (21, 11) and not f.unknown
    text = f.explanation
    assert "acknowledged at offset 1 (op 21, process 2)" in text
    assert "has 2000079 there" in text and "2000113 at no offset" in text
    assert "op 11 of the same process" in text and "transaction aborted" in text
    assert "ABORT marker follows" in text and "producerId 1000, producerEpoch 0" in text
    assert "If we find a duplicate" in text
    assert f.data["held"] == ["2000079"] and f.data["producer_id"] == 1000


@pytest.mark.parametrize(
    "held",
    [
        B(1000, 1, values=(2000079,), txn=False),  # idempotent, in no transaction
        B(1000, 1, values=(2000079,)),  # the ABORT below ended the session's epoch-0 transaction
    ],
)
def test_only_a_marker_that_can_end_the_batchs_transaction_is_named_as_its_abort(held):
    # Hypothesis found the first: the marker was named for a batch outside any transaction.
    log = [B(1000, 0, values=(1000060,)), held, B(1000, 0, marker="ABORT"), B(2, 1, values=(9,))]
    result = check_data_logs(DataLogRead(logs(n1={5: log})), _reused_rows())
    [f] = [f for f in result.findings if f.kind == "acked-offset-holds-other-write"]
    assert "has 2000079 there" in f.explanation
    assert "ABORT marker" not in f.explanation


@pytest.mark.parametrize(
    "case",
    ["value there", "held elsewhere", "offset past the logs", "one log has it", "marker"],
)
def test_acks_the_logs_bear_out_are_silent(case):
    rows = _reused_rows()
    part = list(REUSED)
    other = list(REUSED)
    if case == "value there":
        part[1] = other[1] = B(1000, 0, values=(2000113,))
    elif case == "held elsewhere":
        part = other = [*REUSED, B(1000, 0, values=(2000113,))]
    elif case == "offset past the logs":
        rows[-1] = _send(21, 2, 5, 2000113, offset=40)
    elif case == "one log has it":
        other = [REUSED[0], B(1000, 0, values=(2000113,)), *REUSED[2:]]
    elif case == "marker":
        rows[-1] = _send(21, 2, 5, 2000113, offset=2)
    result = check_data_logs(DataLogRead(logs(n1={5: part}, n2={5: other})), rows)
    assert "acked-offset-holds-other-write" not in kinds(result.findings)
    if case == "held elsewhere":
        assert any("held at offset(s) [4]" in n for n in result.notes)


# Which transaction protocol the markers show ----------------------------------------------------
def test_markers_one_epoch_above_their_writes_are_transaction_version_2():
    from checkers.families.data_log.protocol import marker_epochs, protocol_note

    # KIP-890 part 2: each end bumps the epoch; the next transaction writes with the new one.
    v2 = [
        B(7, 0, values=(1,)),
        B(7, 1, marker="COMMIT"),
        B(7, 1, values=(2,)),
        B(7, 2, marker="ABORT"),
    ]
    classic = [B(8, 0, values=(3,)), B(8, 0, marker="COMMIT"), B(8, 0, values=(4,))]
    assert marker_epochs(logs(n1={0: v2})) == (0, 2)
    assert marker_epochs(logs(n1={0: classic})) == (1, 0)
    assert "transaction.version 2" in protocol_note(logs(n1={0: v2}))
    assert "classic transaction protocol" in protocol_note(logs(n1={0: classic}))
    assert "both protocols" in protocol_note(logs(n1={0: v2 + classic}))
    # A marker whose writes are not in this log (truncated away) says nothing either way.
    assert marker_epochs(logs(n1={0: [B(9, 3, marker="COMMIT")]})) == (0, 0)
    assert protocol_note(logs(n1={0: [B(9, 3, values=(5,))]})) is None


# Shown as a person reads it (kchaos data-log) ----------------------------------------------------
def test_a_log_shown_reads_back_as_the_same_batches_and_records():
    from checkers.families.data_log.show import show

    parts = {
        3: [B(7, 0, values=(1, 2), seq=4), B(7, 0, marker="COMMIT")],
        1: [B(-1, -1, values=(5,), txn=False)],
    }
    log = parse_data_log(dump(parts), "n1")
    again = parse_data_log("\n".join(show(log)) + "\n", "n1")
    for name in again.batches.dtype.names:
        if name != "segment":  # files are numbered as first named: partition order here
            assert list(again.batches[name]) == list(log.batches[name]), name
    assert [again.files[s] for s in again.batches["segment"]] == [
        log.files[s] for s in log.batches["segment"]
    ]
    assert list(again.offsets) == list(log.offsets) and list(again.values) == list(log.values)
    assert list(show(log, partition=3, offsets=(2, 9))) == [
        "Dumping t-3/00000000000000000000.log",
        "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true "
        "position: 0 CreateTime: 1795326812806 ",
        "| offset: 2 CreateTime: 1795326812806 sequence: -1 endTxnMarker: COMMIT (a control "
        "record)",
    ]


def test_kchaos_data_log_prints_a_brokers_batches_and_refuses_what_is_not_there(tmp_path):
    from click.testing import CliRunner

    from checkers.cli import data_log_command

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "n2.txt").write_text(dump({0: [B(7, 0, values=(41, 42))]}))
    run = CliRunner().invoke(data_log_command, [str(tmp_path), "--offsets", "1"])
    assert (
        run.exit_code == 0
        and "| offset: 1 CreateTime: 1795326812806 sequence: 1 payload: 42" in run.output
    )
    run = CliRunner().invoke(data_log_command, [str(tmp_path), "--broker", "n1"])
    assert run.exit_code == 254 and "no such log (brokers: n2)" in run.output
    run = CliRunner().invoke(data_log_command, [str(tmp_path), "--offsets", "x..y"])
    assert run.exit_code == 2 and "an offset (120) or a range (100..140)" in run.output
