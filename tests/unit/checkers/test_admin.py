"""The admin checker on hand-written admin histories: what the brokers' final views prove."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.admin import admin_ops, check_admin
from history.columnar import op_rows, to_table
from tests.unit.checkers.histories import H


class A(H):
    def admin(self, p: int, f: str, value: Any, type_: str = "ok", node: str = "n1",
              error: str | None = None) -> A:  # fmt: skip
        self.invoke(p, f, value)
        extra: dict[str, Any] = {"node": node}
        if error:
            extra["error"] = error
        self.complete(p, f, type_, value if type_ == "ok" else None, **extra)
        return self

    def create(self, p: int, topic: str, type_: str = "ok", **kw: Any) -> A:
        return self.admin(p, "create-topic", {"topic": topic, "partitions": 1, "replication": 3},
                          type_, **kw)  # fmt: skip

    def delete(self, p: int, topic: str, type_: str = "ok", **kw: Any) -> A:
        return self.admin(p, "delete-topic", {"topic": topic}, type_, **kw)

    def view(self, node: str, topics: list[str]) -> A:
        self.invoke(99, "list-topics", None)
        self.complete(99, "list-topics", "ok", {"topics": sorted(topics), "answered_by": node},
                      node=node)  # fmt: skip
        return self


def judge(h: H, kraft: bool | None = True):
    ops = admin_ops(op_rows(to_table(h.history())).to_pylist())
    return check_admin(ops, kraft)


def kinds(h: H, kraft: bool | None = True) -> list[str]:
    return [f.kind for f in judge(h, kraft)[0]]


def test_a_consistent_run_is_clean():
    h = (
        A().create(0, "adm-0-1").create(1, "adm-1-1").delete(0, "adm-0-1").create(0, "adm-0-2")
        .view("n1", ["adm-1-1", "adm-0-2"]).view("n2", ["adm-1-1", "adm-0-2"])
    )  # fmt: skip
    assert judge(h) == ([], ["admin: 2 final topic lists judged against 3 creates and 1 deletes"])


def test_a_lagging_broker_is_not_a_lost_topic():
    # n2 has not applied the last creates yet: its view is an older prefix, which is allowed.
    h = A().create(0, "adm-0-1").create(0, "adm-0-2").view("n1", ["adm-0-1", "adm-0-2"])
    h.view("n2", [])
    assert kinds(h) == []


def test_a_view_with_a_later_topic_but_not_an_acknowledged_one_is_a_lost_topic():
    h = A().create(0, "adm-0-1").create(1, "adm-1-1").view("n2", ["adm-1-1"])
    (f,), _ = judge(h)
    assert f.kind == "lost-topic" and f.data == {"rule": f.data["rule"], "topic": "adm-0-1",
                                                  "broker": "n2"}  # fmt: skip
    assert f.ops == (1, 3, 5)
    assert "n2 lists adm-1-1, created after adm-0-1's create was acknowledged" in f.explanation
    assert "KIP-500" in f.explanation


def test_concurrent_creates_prove_no_order():
    # adm-1-1 was invoked before adm-0-1 was acknowledged: either may sit first in the log.
    h = A().invoke(0, "create-topic", {"topic": "adm-0-1"}).create(1, "adm-1-1")
    h.complete(0, "create-topic", "ok", {"topic": "adm-0-1"}, node="n1")
    h.view("n2", ["adm-1-1"])
    assert kinds(h) == []


def test_a_topic_that_may_have_been_deleted_is_not_lost():
    for outcome in ("ok", "info"):
        h = A().create(0, "adm-0-1").delete(0, "adm-0-1", outcome).create(1, "adm-1-1")
        assert kinds(h.view("n1", ["adm-1-1"])) == []
    h = A().create(0, "adm-0-1").delete(0, "adm-0-1", "fail", error="INVALID_REQUEST")
    assert kinds(h.create(1, "adm-1-1").view("n1", ["adm-1-1"])) == ["lost-topic"]


def test_a_deleted_topic_listed_beside_a_later_one_is_a_lost_deletion():
    h = A().create(0, "adm-0-1").delete(0, "adm-0-1").create(1, "adm-1-1")
    h.view("n3", ["adm-0-1", "adm-1-1"])
    (f,), _ = judge(h)
    assert f.kind == "lost-topic-deletion" and f.ops == (3, 5, 7)
    assert "still lists adm-0-1" in f.explanation


def test_a_deleted_topic_on_a_lagging_broker_is_not_a_lost_deletion():
    h = A().create(0, "adm-0-1").delete(0, "adm-0-1").create(1, "adm-1-1")
    assert kinds(h.view("n3", ["adm-0-1"])) == []


def test_zookeeper_mode_skips_the_prefix_rules_and_says_so():
    h = A().create(0, "adm-0-1").create(1, "adm-1-1").view("n2", ["adm-1-1"])
    found, notes = judge(h, kraft=False)
    assert found == [] and "KRaft clusters only" in notes[0]
    found, notes = judge(h, kraft=None)
    assert found == [] and "cluster mode unknown" in notes[0]


def test_a_failed_create_that_took_effect():
    h = A().create(0, "adm-0-1", "fail", error="INVALID_CONFIG: bad retention.ms")
    h.view("n1", ["adm-0-1"])
    (f,), _ = judge(h, kraft=False)
    assert f.kind == "failed-create-visible" and f.ops == (1, 3) and f.tolerated is None
    assert "INVALID_CONFIG" in f.explanation and "n1 lists it" in f.explanation
    h = A().create(0, "adm-0-1", "fail", error="POLICY_VIOLATION").delete(0, "adm-0-1")
    (f,), _ = judge(h)
    assert "then answered delete-topic ok on it" in f.explanation


def test_a_create_refused_for_want_of_brokers_may_be_a_retrys_answer():
    """librdkafka retries CreateTopics: the first attempt may have created the topic while the
    retry found a broker fenced. Older histories recorded that as fail: reported, tolerated."""
    h = A().create(0, "adm-0-1", "fail", error="INVALID_REPLICATION_FACTOR: only 2 brokers")
    h.view("n1", ["adm-0-1"])
    (f,), _ = judge(h, kraft=False)
    assert f.kind == "failed-create-visible" and f.tolerated and "retry" in f.tolerated


def test_an_unknown_create_that_took_effect_is_fine():
    h = A().create(0, "adm-0-1", "info", error="timed out").view("n1", ["adm-0-1"])
    assert kinds(h) == []


def test_a_topic_nobody_created_is_a_phantom_but_foreign_names_are_ignored():
    h = A().create(0, "adm-0-1").view("n1", ["adm-0-1", "adm-0-2", "queue-topic", "other-1-1"])
    (f,), _ = judge(h)
    assert f.kind == "phantom-topic" and "adm-0-2" in f.explanation


def test_two_cluster_ids_are_a_divergence():
    h = A().admin(0, "describe-cluster", {"cluster_id": "abc", "brokers": [1, 2, 3]})
    h.admin(1, "describe-cluster", {"cluster_id": "xyz", "brokers": [1, 2, 3]}, node="n2")
    h.admin(2, "describe-cluster", {"cluster_id": "abc", "brokers": [1, 2, 3]}, node="n3")
    (f,), _ = judge(h)
    assert f.kind == "cluster-id-divergence" and f.ops == (1, 3)


def test_no_final_view_is_said():
    _, notes = judge(A().create(0, "adm-0-1"))
    assert any("no broker answered list-topics" in n for n in notes)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["c", "d"])), max_size=25),
       st.lists(st.integers(0, 40), max_size=4))  # fmt: skip
def test_any_prefix_of_a_sequential_history_is_a_clean_view(steps, cuts):
    """A model of KRaft: one log of creates and deletes; every view is the state at a prefix."""
    h, live, states, made = A(), [], [[]], {0: 0, 1: 0, 2: 0}
    for p, what in steps:
        if what == "d" and live:
            h.delete(p, live.pop(0))
        else:
            made[p] += 1
            topic = f"adm-{p}-{made[p]}"
            h.create(p, topic)
            live.append(topic)
        states.append(list(live))
    for i, cut in enumerate(cuts):
        h.view(f"n{i}", states[min(cut, len(states) - 1)])
    assert kinds(h) == []


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 12), st.data())
def test_dropping_an_acknowledged_topic_from_a_later_prefix_is_always_found(n, data):
    h = A()
    for i in range(1, n + 1):
        h.create(i % 3, f"adm-{i % 3}-{i}")
    topics = [f"adm-{i % 3}-{i}" for i in range(1, n + 1)]
    lost = data.draw(st.integers(0, n - 2))
    h.view("n2", [t for i, t in enumerate(topics) if i != lost])
    found, _ = judge(h)
    assert [f.kind for f in found] == ["lost-topic"] and found[0].data["topic"] == topics[lost]
