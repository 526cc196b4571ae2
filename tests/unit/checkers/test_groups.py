"""Consumer groups (checkers/families/groups.py): partition ownership from the subscribers'
rebalance events, and committed offsets, on hand-written histories and on a generated correct
group."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.groups import GROUP_FS, check_groups
from history.columnar import op_rows, to_table
from tests.unit.checkers.histories import SEC, H

P = 3  # the partition handed over in the hand-written histories


class G:
    """Subscribers' ops with their rebalance events and commits, each event timed inside the op
    that carries it (as the client's listener runs during the op)."""

    def __init__(self) -> None:
        self.h = H()

    def _inside(self) -> int:
        return self.h.clock + SEC // 10 + 1  # after the next invocation, before its completion

    def _extra(self, events, commit, shift=0):
        extra = {}
        if events:
            t = self._inside() + shift
            extra["rebalance"] = [[e, list(keys), t] for e, keys in events]
        if commit is not None:
            extra["commit"] = {str(k): o for k, o in commit.items()}
        return extra

    def subscribe(self, p, events=(), shift=0):
        self.h.op(p, "subscribe", [P], "ok", [P], **self._extra(events, None, shift))
        return self

    def poll(self, p, reads=None, events=(), commit=None, type_="ok", shift=0):
        reads = reads or {}
        self.h.poll(p, reads, type_, **self._extra(events, commit, shift))
        return self

    def last(self) -> int:
        """The completion index of the last op."""
        return len(self.h.lines) - 1

    def result(self):
        return check_groups(op_rows(to_table(self.h.history()), list(GROUP_FS)).to_pylist())


def records(lo, hi):
    return {P: [(o, 1000 + o) for o in range(lo, hi + 1)]}


def handover(end="revoked", poll=True):
    """Process 2 holds P; process 7 is assigned P; process 2 polls P, then its hold ends."""
    g = G().subscribe(2, [("assigned", [P])]).subscribe(7, [("assigned", [P])])
    assigned = g.last()
    g.poll(2, records(40, 52) if poll else {1: [(0, 5)]})
    polled = g.last()
    if end is not None:
        g.poll(2, events=[(end, [P])])
    return g, assigned, polled, g.last()


def test_a_partition_polled_by_its_previous_owner_after_its_reassignment_is_found():
    g, assigned, polled, revoked = handover()
    r = g.result()
    assert [f.kind for f in r.findings] == ["group-double-owner"]
    f = r.findings[0]
    assert f.key == P
    assert f.ops == (assigned, polled, revoked)
    assert f.explanation.startswith(
        f"key {P} (partition {P}) was assigned to process 7 at 0.300 s (op {assigned}), while "
        "process 2, which had held it since 0.100 s (op 1) and revoked it only at 0.700 s (op "
        f"{revoked}), in an orderly rebalance, polled offsets 40..52 of it"
    )
    assert "KIP-848" in f.explanation
    assert f.data["polls"][0]["offsets"] == list(range(40, 53))
    assert r.checked and r.stats["group_handovers_judged"] == 1


@pytest.mark.parametrize("end", ["lost", None])
def test_a_hold_that_ends_lost_or_unknown_is_not_judged(end):
    g, *_ = handover(end=end)
    assert g.result().findings == []


def test_an_overlap_without_a_poll_of_the_partition_is_a_note_only():
    g, *_ = handover(poll=False)
    r = g.result()
    assert r.findings == []
    assert any("1 handover(s)" in n for n in r.notes)


def test_an_orderly_handover_is_no_finding():
    g = G().subscribe(2, [("assigned", [P])]).poll(2, records(0, 3))
    g.poll(2, events=[("revoked", [P])]).subscribe(7, [("assigned", [P])])
    g.poll(7, records(4, 6)).poll(2, {})
    r = g.result()
    assert r.findings == [] and [n for n in r.notes if "judged" not in n] == []
    assert r.stats["group_handovers_judged"] == 0


def test_the_poll_that_carries_the_revoke_is_not_counted():
    g = G().subscribe(2, [("assigned", [P])]).subscribe(7, [("assigned", [P])])
    g.poll(2, records(40, 52), events=[("revoked", [P])])
    assert g.result().findings == []


def test_a_poll_invoked_before_the_reassignment_is_not_counted():
    g = G().subscribe(2, [("assigned", [P])])
    g.h.invoke(2, "poll", [["poll"]])
    g.subscribe(7, [("assigned", [P])])
    g.h.complete(2, "poll", "ok", [["poll", {str(P): [[40, 1040]]}]])
    g.poll(2, events=[("revoked", [P])])
    r = g.result()
    assert r.findings == []
    assert any("1 handover(s)" in n for n in r.notes)


def test_the_same_member_assigned_again_is_no_handover():
    g = G().subscribe(2, [("assigned", [P])]).poll(2, events=[("assigned", [P])])
    g.poll(2, records(0, 1)).poll(2, events=[("revoked", [P])])
    assert g.result().findings == []


def test_events_timed_outside_their_op_say_nothing():
    # Process 7's assignment claims a time before its op began: not trusted.
    g = G().subscribe(2, [("assigned", [P])]).subscribe(7, [("assigned", [P])], shift=-SEC)
    g.poll(2, records(40, 52)).poll(2, events=[("revoked", [P])])
    r = g.result()
    assert r.findings == []
    assert any("1 rebalance event(s) timed outside" in n for n in r.notes)
    # The previous owner's lost, timed wrongly, still ends its hold: no finding from a window
    # that would otherwise run on to a later revoke.
    g = G().subscribe(2, [("assigned", [P])]).poll(2, events=[("lost", [P])], shift=SEC)
    g.subscribe(7, [("assigned", [P])]).poll(2, records(0, 1))
    g.poll(2, events=[("revoked", [P])])
    assert g.result().findings == []


def test_subscribers_without_events_get_a_note_and_no_judgement():
    g = G().subscribe(2).subscribe(7).poll(2, records(0, 1))
    r = g.result()
    assert r.findings == [] and not r.checked
    assert any("no op records rebalance events" in n for n in r.notes)
    # Assign-mode histories: nothing to say.
    h = H().assign(2, [P]).poll(2, records(0, 1))
    assert check_groups(op_rows(to_table(h.history()), list(GROUP_FS)).to_pylist()).notes == []


# -- committed offsets -----------------------------------------------------------------------


def members(*ps):
    g = G()
    for p in ps:
        g.subscribe(p)
    return g


def test_a_commit_below_an_earlier_acknowledged_one_is_found():
    g = members(2, 7).poll(2, records(40, 51), commit={P: 52})
    first = g.last()
    g.poll(7, records(40, 41), commit={P: 42})
    r = g.result()
    assert [f.kind for f in r.findings] == ["committed-offset-regressed"]
    f = r.findings[0]
    assert f.key == P and f.ops == (first, g.last())
    assert f"op {first} (process 2) committed offset 52" in f.explanation
    assert f"op {g.last()} (process 7" in f.explanation
    assert "committed offset 42" in f.explanation
    assert "auto.offset.reset" in f.explanation  # a truncation can cause it: said
    assert [(y["op"], y["offset"]) for y in f.data["later"]] == [(g.last(), 42)]


def test_commits_that_only_go_forward_or_stay_are_no_finding():
    g = members(2, 7).poll(2, records(40, 51), commit={P: 52}).poll(7, commit={P: 52})
    g.poll(7, records(52, 60), commit={P: 61})
    r = g.result()
    assert r.findings == [] and r.stats["group_commits_judged"] == 3


def test_concurrent_commits_are_not_compared():
    g = members(2, 7)
    g.h.invoke(7, "poll", [["poll"]])
    g.poll(2, records(40, 51), commit={P: 52})
    g.h.complete(7, "poll", "ok", [["poll", {}]], commit={str(P): 42})
    assert g.result().findings == []


def test_invalid_offsets_failed_commits_and_other_groups_are_not_commits():
    g = members(2, 7).poll(2, records(40, 51), commit={P: 52})
    g.poll(7, commit={P: -1001})  # librdkafka's OFFSET_INVALID: nothing stored
    g.h.poll(7, records(0, 1), commit_error="REBALANCE_IN_PROGRESS")
    g.h.assign(9, [P]).poll(9, {}, commit={str(P): 3})  # an assign-mode consumer's own group
    g.poll(7, records(0, 1), commit={P: 2}, type_="info")  # not ok: no commit
    assert g.result().findings == []


def test_one_finding_per_commit_that_others_fell_below():
    g = members(2, 7, 8).poll(2, records(40, 51), commit={P: 52})
    g.poll(7, commit={P: 42}).poll(8, commit={P: 45})
    [f] = g.result().findings
    assert [y["offset"] for y in f.data["later"]] == [42, 45]


# -- end to end: a stored run --------------------------------------------------------------


def test_the_registry_runs_both_rules_on_a_stored_history(tmp_path):
    g = G()
    for o in range(3):
        g.h.send(0, P, 1000 + o, o)
    g.subscribe(2, [("assigned", [P])]).subscribe(7, [("assigned", [P])])
    g.poll(2, {P: [(0, 1000), (1, 1001)]}, commit={P: 2})
    g.poll(2, events=[("revoked", [P])])
    g.poll(7, {P: [(2, 1002)]}, commit={P: 1})
    g.h.write(tmp_path)
    verdict = check(tmp_path, write=False)
    kinds = sorted(f.kind for f in verdict.failures)
    assert kinds == ["committed-offset-regressed", "group-double-owner"]
    assert verdict.status == "invalid"


# -- a generated correct group -----------------------------------------------------------


@dataclass
class Group:
    """A correct group: a partition moves by an orderly revoke then an assignment, or a member
    is fenced (the partition given on at once) and goes on fetching it until it learns it lost
    it. Owners commit where they read up to; a fenced member's commits are refused."""

    g: G = field(default_factory=G)
    owner: dict[int, int] = field(default_factory=dict)
    zombie: dict[int, set[int]] = field(default_factory=dict)  # member -> partitions lost unseen
    position: dict[tuple[int, int], int] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)

    def held(self, m):
        return {p for p, o in self.owner.items() if o == m} | self.zombie.get(m, set())

    def assign(self, p, m):
        self.learn(m)  # a fenced member rejoins, and is given partitions, only once it knows
        self.g.poll(m, events=[("assigned", [p])])
        self.owner[p] = m
        self.position[m, p] = self.committed.get(p, 0)

    def move(self, p, m):
        a = self.owner.get(p)
        if a == m:
            return
        if a is not None:
            self.g.poll(a, events=[("revoked", [p])])
        self.assign(p, m)

    def fence(self, p, m):
        a = self.owner.get(p)
        if a is None or a == m:
            return self.move(p, m)
        self.zombie.setdefault(a, set()).add(p)
        self.assign(p, m)

    def learn(self, m):
        lost = sorted(self.zombie.pop(m, set()))
        if lost:
            self.g.poll(m, events=[("lost", lost)])

    def poll(self, m, n):
        reads, commit = {}, {}
        for p in sorted(self.held(m)):
            start = self.position.get((m, p), 0)
            reads[p] = [(o, 1000 + o) for o in range(start, start + n)]
            self.position[m, p] = start + n
            if self.owner.get(p) == m:
                commit[p] = start + n
        if set(reads) - set(commit):
            # Partitions it lost unseen: the coordinator refuses the fenced member's commit.
            self.g.h.poll(m, reads, commit_error="ILLEGAL_GENERATION")
        else:
            for p, o in commit.items():
                self.committed[p] = o
            self.g.poll(m, reads, commit=commit or None)


MEMBERS, PARTS = (2, 7, 11), (0, 1, 2)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("move"), st.sampled_from(PARTS), st.sampled_from(MEMBERS)),
        st.tuples(st.just("fence"), st.sampled_from(PARTS), st.sampled_from(MEMBERS)),
        st.tuples(st.just("learn"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("poll"), st.sampled_from(MEMBERS), st.integers(0, 3)),
    ),
    max_size=30,
)


def group_of(acts) -> Group:
    grp = Group()
    for m in MEMBERS:
        grp.g.subscribe(m)
    for act in acts:
        getattr(grp, act[0])(*act[1:])
    return grp


@settings(max_examples=300)
@given(steps)
def test_a_correct_group_yields_no_finding(acts):
    assert group_of(acts).g.result().findings == []


@settings(max_examples=100)
@given(steps, st.sampled_from(PARTS), st.integers(1, 3))
def test_a_revoke_recorded_after_the_next_assignment_is_found(acts, p, n):
    grp = group_of(acts)
    a, b = MEMBERS[0], MEMBERS[1]
    grp.move(p, a)
    grp.learn(a)
    # b is assigned p while a still holds it; a polls it; only then does a revoke it in order.
    grp.assign(p, b)
    assigned = grp.g.last()
    grp.zombie.setdefault(a, set()).add(p)
    grp.poll(a, n)
    polled = grp.g.last()
    grp.zombie[a].discard(p)
    grp.g.poll(a, events=[("revoked", [p])])
    found = [f for f in grp.g.result().findings if f.kind == "group-double-owner"]
    assert [(f.key, f.data["owner"], f.data["new_owner"]) for f in found] == [(p, a, b)]
    assert {assigned, polled, grp.g.last()} <= set(found[0].ops)


def test_a_malformed_event_ends_its_members_holds():
    """A Parquet history not written by the reader may hold an event it cannot read; if that
    was process 2's lost, process 2's hold must not run on to its later revoke."""
    g = G().subscribe(2, [("assigned", [P])]).poll(2, events=[("lost", [P])])
    lost = g.last()
    g.subscribe(7, [("assigned", [P])]).poll(2, records(0, 1)).poll(2, events=[("revoked", [P])])
    rows = op_rows(to_table(g.h.history()), list(GROUP_FS)).to_pylist()
    assert check_groups(rows).findings == []
    for r in rows:
        if r["index"] == lost:
            r["fields_json"] = json.dumps({"rebalance": [["lost", ["x"], 1]]})
    r = check_groups(rows)
    assert r.findings == []
    assert any("1 malformed" in n for n in r.notes)


@settings(max_examples=100)
@given(steps, st.sampled_from(PARTS), st.sampled_from(MEMBERS), st.integers(1, 5))
def test_a_later_commit_below_the_groups_is_found(acts, p, m, back):
    grp = group_of(acts)
    grp.move(p, m)
    grp.learn(m)  # so that its commit is not refused for a partition it lost unseen
    grp.poll(m, 3)
    high = grp.g.last()
    top = grp.committed[p]
    grp.g.poll(m, commit={p: max(0, top - back)})
    found = [f for f in grp.g.result().findings if f.kind == "committed-offset-regressed"]
    assert [(f.key, f.data["offset"], f.data["later"][0]["op"]) for f in found] == [
        (p, top, grp.g.last())
    ]
    assert found[0].data["committed_by"] == high
