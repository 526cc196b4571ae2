"""KIP-866 migration states never going backwards: observer samples and committed records."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.metadata import check_metadata
from checkers.families.metadata_log.check import check_logs
from checkers.families.metadata_log.parse import parse_metadata_log
from checkers.families.migration import ORDER, migration_note
from checkers.families.observer_samples import observe_samples_from_ops
from history.columnar import op_rows, to_table
from tests.unit.checkers.histories import H
from tests.unit.checkers.metalogs import CLUSTER, dump, healthy, rec

KIND = "migration-state-regression"


def migration_findings(h):
    data = observe_samples_from_ops(op_rows(to_table(h.history())).to_pylist())
    return [f for f in check_metadata(data) if f.kind == KIND]


def states(node, *values, h=None):
    h = h or H()
    for v in values:
        h.observe(node, zk_migration_state=v)
    return h


def test_a_node_going_back_from_dual_write_to_copying_is_reported():
    h = states("c1", "PRE_MIGRATION", "MIGRATION", "MIGRATION", "PRE_MIGRATION")
    [f] = migration_findings(h)
    assert f.ops == (3, 7) and f.data["states"] == ["MIGRATION", "PRE_MIGRATION"]
    assert "DualWriteMetadata" in f.explanation and "KIP-866" in f.explanation


def test_a_whole_migration_with_startup_values_is_clean():
    # The gauge reads -1 before the first image and NONE for an empty log, then the migration.
    h = states("c1", "-1", "NONE", "PRE_MIGRATION", "MIGRATION", "MIGRATION", "POST_MIGRATION")
    states("b1", "ZK", "ZK", None, None, h=h)  # a ZK broker, then restarted as a KRaft broker
    assert migration_findings(h) == []


def test_pure_kraft_and_zookeeper_clusters_are_clean():
    assert migration_findings(states("n1", "-1", "NONE", "NONE", "NONE")) == []
    assert migration_findings(states("z1", "ZK", "ZK", None, "ZK")) == []


def test_nodes_are_judged_apart():
    h = states("c1", "MIGRATION")
    states("c2", "PRE_MIGRATION", h=h)  # a follower that has not replayed as far: no regression
    assert migration_findings(h) == []


def test_none_after_a_migration_state_needs_a_restart_to_be_excused():
    assert [f.data["states"] for f in migration_findings(states("c1", "MIGRATION", "NONE"))] == [
        ["MIGRATION", "NONE"]
    ]
    h = states("c1", "MIGRATION").nemesis("kill", {"nodes": ["c1"]})
    states("c1", "-1", "NONE", "MIGRATION", h=h)
    assert migration_findings(h) == []
    silent = states("c1", "MIGRATION").observe("c1", type_="info")
    assert migration_findings(states("c1", "NONE", h=silent)) == []


def test_a_restart_does_not_excuse_going_back_but_losing_the_disk_does():
    h = states("c1", "MIGRATION").nemesis("kill", {"nodes": ["c1"]})
    assert len(migration_findings(states("c1", "PRE_MIGRATION", h=h))) == 1
    h = states("c1", "MIGRATION").nemesis("wipe-data", {"nodes": ["c1"]})
    assert migration_findings(states("c1", "PRE_MIGRATION", h=h)) == []


NOISE = st.sampled_from([None, "-1", "7"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.lists(NOISE, max_size=4))
def test_nondecreasing_states_with_startup_noise_never_alarm(ranks, noise):
    values = ["NONE", *noise, *[ORDER[r] for r in sorted(ranks)]]
    assert migration_findings(states("c1", *values)) == []


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=12, unique=True))
def test_any_step_back_is_found(ranks):
    up = sorted(ranks)
    values = [ORDER[r] for r in [*up, up[0]]]
    [f] = migration_findings(states("c1", *values))
    assert f.data["states"] == [ORDER[up[-1]], ORDER[up[0]]]


# --- committed ZkMigrationStateRecords ------------------------------------------------------


def record(value, epoch=2):
    return (epoch, rec("ZK_MIGRATION_STATE_RECORD", zkMigrationState=value))


def logged(*values, tail=()):
    log = [*healthy(2), *[record(v) for v in values], *tail]
    logs = {n: parse_metadata_log(dump(log), n) for n in ("n1", "n2", "n3")}
    return [f for f in check_logs(logs, CLUSTER).findings if f.kind == KIND]


def test_committed_records_going_back_are_reported_citing_both():
    # Kafka's record values: 0 NONE, 2 PRE_MIGRATION, 1 MIGRATION, 3 POST_MIGRATION.
    [f] = logged(2, 1, 2)
    assert f.data["states"] == ["MIGRATION", "PRE_MIGRATION"] and f.data["offsets"] == [10, 11]
    assert "n1.txt:" in f.data["records"][0] and '"zkMigrationState":2' in f.data["records"][1]
    assert [f.data["states"] for f in logged(2, 1, 3, 0)] == [["POST_MIGRATION", "NONE"]]
    assert [f.data["states"] for f in logged(0, 2)] == [["NONE", "PRE_MIGRATION"]]


def test_committed_records_in_order_are_clean():
    assert logged(0, 0, 0) == []
    assert logged(2, 2, 1, 1, 3, 3) == []


def test_a_step_back_beyond_the_committed_bound_is_not_judged():
    log = [*healthy(2), record(2), (3, "LEADER_CHANGE(2)"), record(1, 3), record(2, 3)]

    def check(n2_cut):
        cuts = {"n1": 0, "n2": n2_cut, "n3": 2}
        logs = {n: parse_metadata_log(dump(log[: len(log) - c]), n) for n, c in cuts.items()}
        return check_logs(logs, CLUSTER)

    # Offset 12 (back to PRE_MIGRATION) is on n1 only: committed up to 11, so not judged ...
    result = check(n2_cut=1)
    assert result.checked and "committed up to offset 11" in result.notes[0]
    assert [f for f in result.findings if f.kind == KIND] == []
    # ... and once a majority holds it, it is.
    assert [f.data["offsets"] for f in check(n2_cut=0).findings if f.kind == KIND] == [[11, 12]]


# --- KIP-866's order: no finalization without dual write -----------------------------------

SKIP = "migration-state-skip"


def skips(h):
    data = observe_samples_from_ops(op_rows(to_table(h.history())).to_pylist())
    return [f for f in check_metadata(data) if f.kind == SKIP]


def logged_skips(*values):
    log = [*healthy(2), *[record(v) for v in values]]
    logs = {n: parse_metadata_log(dump(log), n) for n in ("n1", "n2", "n3")}
    return [f for f in check_logs(logs, CLUSTER).findings if f.kind == SKIP]


def test_finalized_straight_after_copying_is_a_skip_in_samples_and_in_the_log():
    [f] = skips(states("c1", "PRE_MIGRATION", "PRE_MIGRATION", "POST_MIGRATION"))
    assert f.ops == (3, 5) and "never MIGRATION (DualWriteMetadata)" in f.explanation
    assert "KIP-866" in f.explanation
    [g] = logged_skips(2, 3)
    assert g.data["offsets"] == [9, 10] and "MigrationFinalized" in g.explanation


def test_the_whole_order_and_a_partial_migration_are_no_skip():
    assert skips(states("c1", "NONE", "PRE_MIGRATION", "MIGRATION", "POST_MIGRATION")) == []
    assert skips(states("c1", "PRE_MIGRATION", "MIGRATION")) == []
    assert logged_skips(2, 1, 3) == [] and logged_skips(2, 2, 1) == []


def test_a_node_down_or_cut_off_during_dual_write_may_see_only_the_final_state():
    h = states("c2", "PRE_MIGRATION").nemesis("kill", {"nodes": ["c2"]})
    assert skips(states("c2", "POST_MIGRATION", h=h)) == []
    silent = states("c2", "PRE_MIGRATION").observe("c2", type_="info")
    assert skips(states("c2", "POST_MIGRATION", h=silent)) == []
    # A migration step restarting the node excuses it the same way.
    h = states("c2", "PRE_MIGRATION")
    step = {"step": "finalize-controller", "node": "c2"}
    h.op("migration", "finalize-controller", step, "ok", step, node="c2")
    assert skips(states("c2", "POST_MIGRATION", h=h)) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(ORDER[1:]), min_size=1, max_size=10))
def test_a_skip_is_reported_exactly_when_post_follows_pre_directly(values):
    ordered = sorted(values, key=ORDER.index)
    expected = any(a == "PRE_MIGRATION" and b == "POST_MIGRATION" for a, b in pairwise(ordered))
    assert bool(skips(states("c1", *ordered))) == expected
    codes = {"PRE_MIGRATION": 2, "MIGRATION": 1, "POST_MIGRATION": 3}
    assert bool(logged_skips(*[codes[v] for v in ordered])) == expected


def test_the_note_says_how_far_the_migration_got_and_why_it_stopped():
    h = H()
    for f, node in (("await-pre-migration", None), ("enable-migration", "b1")):
        h.op("migration", f, {"step": f, "node": node}, "ok", {"step": f}, node=node)
    h.op("migration", "enable-migration", {"node": "b2"}, "info", None, node="b2", error="slow")
    h.op("migration", "await-dual-write", {}, "fail", None, error="not attempted")
    rows = op_rows(to_table(h.history())).to_pylist()
    note = migration_note(rows)
    assert note is not None and note.startswith("migration: 2 of 4 steps ok")
    assert (
        "the last enable-migration b1" in note and "(enable-migration b2) ended info: slow" in note
    )
    assert migration_note([r for r in rows if r["process"] != "migration"]) is None


def test_a_zookeeper_controller_broker_beside_the_active_kraft_controller_is_no_split():
    # Before the KRaft controller takes /controller over, a migrating ZooKeeper-mode broker is
    # ZooKeeper's controller (count 1) and observes the KRaft quorum's epoch: not a 2nd leader.
    leader = {"state": "leader", "leader": 3001, "epoch": 4, "high_watermark": 10}
    observer = {"state": "observer", "leader": 3001, "epoch": 4, "high_watermark": 10}
    h = H()
    for _ in range(20):
        h.observe("c1", raft=leader, active_controller_count=1)
        h.observe("b1", roles=["broker"], raft=observer, active_controller_count=1)
    data = observe_samples_from_ops(op_rows(to_table(h.history())).to_pylist())
    assert [f for f in check_metadata(data) if f.kind == "multiple-active-controllers"] == []
    # Two controllers active in one epoch for as long are still found.
    for _ in range(20):
        h.observe("c1", raft=leader, active_controller_count=1)
        h.observe("c2", raft=leader, active_controller_count=1)
    data = observe_samples_from_ops(op_rows(to_table(h.history())).to_pylist())
    assert [f for f in check_metadata(data) if f.kind == "multiple-active-controllers"]
