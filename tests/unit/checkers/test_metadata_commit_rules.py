"""Lost fencing, brokers applying uncommitted metadata, brokers' logs diverging: each rule on
hand-written decoded logs (and observer samples), with the near misses that must stay silent."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.metadata_log.applied import applied_beyond_commit
from checkers.families.metadata_log.check import check_logs, check_run_metadata
from checkers.families.metadata_log.parse import parse_metadata_log
from checkers.families.observer_samples import observe_samples_from_ops
from history.columnar import op_rows, to_table
from tests.unit.checkers.histories import H
from tests.unit.checkers.metalogs import dump, healthy, rec

DEDICATED = {
    "timing": "fast",
    "nodes": [{"name": f"c{i}", "roles": ["controller"], "node_id": i} for i in (1, 2, 3)]
    + [{"name": f"b{i}", "roles": ["broker"], "node_id": i} for i in (4, 5)],
}
NOOP = rec("NO_OP_RECORD")


def parsed(**entries):
    return {n: parse_metadata_log(dump(e), n) for n, e in entries.items()}


def found(result, kind):
    return [f for f in result.findings if f.kind == kind]


def observed(h):
    return observe_samples_from_ops(op_rows(to_table(h.history())).to_pylist())


def broker_sample(h, node, applied, hw=None):
    raft = {"state": "observer", "leader": 1, "epoch": 3, "high_watermark": hw}
    return h.observe(node, roles=["broker"], raft=raft, metadata_offset=applied)


# --- a deposed leader's write taking effect --------------------------------------------------


def test_stale_epoch_committed_after_a_newer_one_is_reported_citing_both_records():
    log = [*healthy(2)[:5], (3, "LEADER_CHANGE(2)"), (3, NOOP), (2, NOOP), (3, NOOP), (3, NOOP)]
    result = check_logs(parsed(c1=log, c2=log, c3=log), DEDICATED)
    [f] = found(result, "deposed-leader-write")
    assert (f.data["newer_epoch"], f.data["stale_epoch"], f.data["offsets"]) == (3, 2, [7])
    assert "c1.txt" in f.data["records"][0] and "offset 5 epoch 3" in f.data["records"][0]
    assert "offset 7 epoch 2" in f.data["records"][1]
    assert "KIP-500" in f.explanation and not f.unknown


def test_a_stale_write_beyond_the_committed_bound_is_not_reported():
    # Every log ends with the old leader's write, but no newer entry after it is committed.
    log = [*healthy(2)[:5], (3, "LEADER_CHANGE(2)"), (3, NOOP), (2, NOOP)]
    result = check_logs(parsed(c1=log, c2=log, c3=log), DEDICATED)
    assert result.checked and found(result, "deposed-leader-write") == []


def test_a_deposed_leaders_tail_on_a_minority_is_not_a_committed_write():
    committed = [*healthy(2), (3, "LEADER_CHANGE(2)"), (3, NOOP), (3, NOOP)]
    stale = [*healthy(2), (2, NOOP), (2, NOOP)]  # old leader went on in epoch 2
    result = check_logs(parsed(c1=committed, c2=committed, c3=stale), DEDICATED)
    assert result.findings == []
    assert any("never agree again" in n for n in result.notes)


def test_an_older_epoch_entry_committed_by_a_later_leader_is_not_stale_raft_figure_8():
    """c3 holds epoch 5 at offset 9 (never committed); the epoch-6 leader committed its own
    epoch-4 entry there. Offset by offset across logs epochs would read 5 then 4 then 6; the
    committed log (the holders of the bound) reads 4 then 6."""
    base = healthy(2)
    good = [*base, (4, NOOP), (6, "LEADER_CHANGE(2)"), (6, NOOP)]
    stale = [*base, (5, "LEADER_CHANGE(2)")]
    result = check_logs(parsed(c3=stale, c1=good, c2=good), DEDICATED)
    assert found(result, "deposed-leader-write") == [] and result.checked


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=4, max_size=20),
    st.lists(st.integers(0, 6), min_size=3, max_size=3),
)
def test_nondecreasing_epochs_never_alarm(steps, cuts):
    epoch, entries = 1, []
    for s in steps:
        epoch += s
        entries.append((epoch, NOOP))
    logs = parsed(**{f"c{i + 1}": entries[: len(entries) - c] for i, c in enumerate(cuts)})
    assert found(check_logs(logs, DEDICATED), "deposed-leader-write") == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=3, max_size=12), st.data())
def test_a_lower_epoch_inside_the_committed_part_is_always_found(steps, data):
    epoch, entries = 1, []
    for s in steps:
        epoch += s
        entries.append((epoch, NOOP))
    at = data.draw(st.integers(1, len(entries) - 1))
    lower = data.draw(st.integers(0, entries[at - 1][0] - 1))
    log = [*entries[:at], (lower, NOOP), *entries[at:], (epoch, NOOP)]
    [f] = found(check_logs(parsed(c1=log, c2=log, c3=log), DEDICATED), "deposed-leader-write")
    assert f.data["offsets"] == [at] and f.data["stale_epoch"] == lower


# --- a broker applying metadata beyond the committed offset ----------------------------------


def _short_quorum():
    """Voters end at offset 8 (healthy()); the newest epoch's entries are on all three."""
    h = healthy(2)
    return parsed(c1=h, c2=h, c3=h)


def test_applied_offset_no_majority_ever_held_is_reported():
    h = H().observe("c1", raft={"state": "leader", "leader": 1, "epoch": 2, "high_watermark": 9})
    broker_sample(h, "b4", 12, hw=9)
    result = check_logs(_short_quorum(), DEDICATED, observed=observed(h))
    [f] = found(result, "applied-uncommitted-metadata")
    assert f.ops == (3,) and f.data["applied_offset"] == 12
    assert f.data["voters_lacking"] == ["c1", "c2", "c3"]
    assert "metadata/c1.txt ends at offset 8" in f.explanation and "KIP-631" in f.explanation


def test_last_applied_offset_is_inclusive_and_the_high_watermark_exclusive():
    # Voters end at 8, so applied offset 8 is committed; 9 is not, and a high watermark of 9
    # (offsets < 9) does not cover it, while one of 10 does.
    ok = broker_sample(H(), "b4", 8, hw=9)
    assert check_logs(_short_quorum(), DEDICATED, observed=observed(ok)).findings == []
    bad = broker_sample(H(), "b4", 9, hw=9)
    result = check_logs(_short_quorum(), DEDICATED, observed=observed(bad))
    assert [f.data["applied_offset"] for f in result.findings] == [9]
    covered = broker_sample(H(), "b4", 9, hw=9).observe("c2", raft={"high_watermark": 10})
    assert check_logs(_short_quorum(), DEDICATED, observed=observed(covered)).findings == []


def test_applied_offset_the_logs_cannot_rule_out_is_a_note():
    # c1 and c2 reach offset 15 in epoch 3 but with different entries: nothing past 8 is proven
    # committed, yet only c3 provably lacks offset 12, and two voters may have held it.
    h = healthy(2)
    c1 = [*h, *[(3, NOOP)] * 7]
    c2 = [*h, *[(3, rec("NO_OP_RECORD", x=1))] * 7]
    logs = parsed(c1=c1, c2=c2, c3=h)
    sample = broker_sample(H(), "b4", 12, hw=9)
    result = check_logs(logs, DEDICATED, observed=observed(sample))
    assert found(result, "applied-uncommitted-metadata") == []
    assert any("b4 applied offset 12" in n and "not judged" in n for n in result.notes)


def test_a_cut_or_empty_voter_file_proves_nothing():
    h = healthy(2)
    text = dump(h)
    logs = {
        "c1": parse_metadata_log(text, "c1"),
        "c2": parse_metadata_log(text[:-5], "c2"),  # cut mid-line
        "c3": parse_metadata_log("", "c3"),  # no segment dumped
    }
    result = check_logs(logs, DEDICATED, observed=observed(broker_sample(H(), "b4", 12, hw=9)))
    assert found(result, "applied-uncommitted-metadata") == []
    assert any("not judged" in n for n in result.notes)


def test_an_empty_segment_left_by_a_snapshot_still_counts_as_held():
    # c2's and c3's only segments are empty but start at 20: their logs reached offset 19.
    empty = parse_metadata_log(
        "Dumping /x/00000000000000000020.log\nLog starting offset: 20\n", "c2"
    )
    assert empty.complete and empty.end_offset == 20
    logs = {"c1": _short_quorum()["c1"], "c2": empty, "c3": empty}
    data = observed(broker_sample(H(), "b4", 12, hw=9))
    found_, notes = applied_beyond_commit(data, logs, ["c1", "c2", "c3"], 8)
    assert found_ == [] and any("not judged" in n for n in notes)
    # The same segment starting at 10 proves those voters never reached offset 12.
    short = parse_metadata_log(
        "Dumping /x/00000000000000000010.log\nLog starting offset: 10\n", "c2"
    )
    found_, _ = applied_beyond_commit(
        data, {**logs, "c2": short, "c3": short}, ["c1", "c2", "c3"], 8
    )
    assert [f.data["voter_ends"] for f in found_] == [{"c1": 8, "c2": 9, "c3": 9}]


def test_data_loss_fault_leaves_applied_offsets_unjudged():
    h = H().nemesis("wipe-data", {"nodes": ["c2"]})
    broker_sample(h, "b4", 12, hw=9)
    result = check_logs(_short_quorum(), DEDICATED, observed=observed(h))
    assert found(result, "applied-uncommitted-metadata") == []
    assert any("data-loss fault" in n for n in result.notes)


# --- brokers' own logs against the committed log ---------------------------------------------


def test_broker_differing_at_a_committed_offset_and_agreeing_later_is_reported():
    h = healthy(2)
    odd = [*h[:3], (2, rec("REGISTER_BROKER_RECORD", brokerId=2, brokerEpoch=99)), *h[4:]]
    result = check_logs(_short_quorum(), DEDICATED, observers=parsed(b4=h, b5=odd))
    [f] = found(result, "broker-metadata-divergence")
    assert f.data["node"] == "b5" and f.data["offset"] == 3
    assert "metadata/observers/b5.txt" in f.data["records"][0]
    assert 'brokerEpoch":99' in f.data["records"][0] and "metadata/c1.txt" in f.data["records"][1]


def test_a_lagging_broker_or_one_holding_a_deposed_leaders_tail_is_not_reported():
    h = healthy(2)
    committed = [*h, (3, "LEADER_CHANGE(2)"), (3, NOOP), (3, NOOP)]
    stale_tail = [*h, (2, NOOP), (2, NOOP), (2, NOOP)]  # fetched from the old leader
    logs = parsed(c1=committed, c2=committed, c3=committed)
    result = check_logs(logs, DEDICATED, observers=parsed(b4=h[:4], b5=stale_tail))
    assert result.findings == []
    assert any("broker b5" in n and "has not fetched" in n for n in result.notes)


def test_a_broker_differing_only_beyond_the_committed_bound_is_not_reported():
    h = healthy(2)
    ahead = [*h, (2, NOOP), (2, rec("NO_OP_RECORD", x=1)), (2, NOOP)]
    result = check_logs(_short_quorum(), DEDICATED, observers=parsed(b4=ahead))
    assert result.findings == []


def test_brokers_never_count_toward_the_majority():
    # c1 alone wrote epoch-3 entries; the brokers copied them. Counting the brokers would make
    # offset 11 "committed" (3 of 5 copies); counting only voters proves nothing past epoch 2.
    h = healthy(2)
    ahead = [*h, (3, "LEADER_CHANGE(2)"), (3, NOOP), (3, NOOP)]
    for observers in ({"b4": ahead, "b5": ahead}, {}):
        logs = parsed(c1=ahead, c2=h, c3=h, **observers)  # brokers misfiled among voters
        result = check_logs(logs, DEDICATED)
        assert [f.kind for f in result.findings] == ["metadata-log-unknown"]
    assert any("b4.txt: not a controller" in n for n in check_logs(
        parsed(c1=ahead, c2=h, c3=h, b4=ahead), DEDICATED).notes)  # fmt: skip


def _run_dir_with_odd_broker(tmp_path, broker):
    """Voters healthy (committed up to 8); `broker` differs at offset 3 and agrees after."""
    h = healthy(2)
    odd = [*h[:3], (2, rec("REGISTER_BROKER_RECORD", brokerId=2, brokerEpoch=99)), *h[4:]]
    (tmp_path / "metadata" / "observers").mkdir(parents=True)
    for n in ("c1", "c2", "c3"):
        (tmp_path / "metadata" / f"{n}.txt").write_text(dump(h))
    (tmp_path / "metadata" / "observers" / f"{broker}.txt").write_text(dump(odd))
    (tmp_path / "cluster.json").write_text(json.dumps(DEDICATED))


def test_run_directory_reads_observer_logs_apart(tmp_path):
    _run_dir_with_odd_broker(tmp_path, "b4")
    result = check_run_metadata(tmp_path, [], None, set())
    assert [f.kind for f in result.findings] == ["broker-metadata-divergence"]
    assert "committed up to offset 8" in result.notes[0] and "3 of 3 voters" in result.notes[0]


def test_check_of_a_run_reports_the_new_rules(tmp_path):
    from checkers.api import check

    _run_dir_with_odd_broker(tmp_path, "b5")
    hist = broker_sample(H().send(0, 0, 1, 0).poll(1, {0: [(0, 1)]}), "b4", 12, hw=9)
    hist.write(tmp_path)
    verdict = check(tmp_path, engine="local")
    assert verdict.status == "invalid"
    assert sorted(f.kind for f in verdict.findings) == [
        "applied-uncommitted-metadata",
        "broker-metadata-divergence",
    ]
    # Without decoded logs the same sample cannot be judged: a note, and a valid run.
    bare = tmp_path / "bare"
    bare.mkdir()
    hist.write(bare)
    verdict = check(bare, engine="local")
    assert verdict.status == "valid" and verdict.findings == []
    assert any(
        "b4 applied offset 12" in n and "no decoded metadata logs" in n for n in verdict.notes
    )
