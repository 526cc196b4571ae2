"""`kchaos run --workload admin` on a real kraft-combined cluster, no faults: ok admin ops name the
broker asked, and every topic created with ok is listed by every broker at the end unless it was
deleted with ok (or its create/delete has an unknown outcome)."""

from __future__ import annotations

import json

import pytest

from history.reader import read_history
from tests.integration.runs import quiet_run

NAME = "adm-run-it"
SUBNET = "10.213.82.0/24"


@pytest.fixture(scope="module")
def admin_run(docker_client, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        7,
        results,
        workload="admin",
        time_limit=20,
        concurrency=3,
        rate=10,
        final_timeout=60,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    yield done.result


def test_admin_ops_are_ok_and_name_nodes(admin_run):
    assert admin_run.exit_code == 0, admin_run.summary
    results = json.loads((admin_run.run_dir / "results.json").read_text())
    assert results["status"] == "valid" and results["stats"]["admin_ops"] > 0, results
    assert any("final topic lists judged" in n for n in results["notes"]), results["notes"]
    ops = read_history(admin_run.run_dir).ops
    oks = [op for op in ops if op["type"] == "ok" and isinstance(op["process"], int)]
    assert {"create-topic", "describe-cluster"} <= {op["f"] for op in oks}
    assert all(op["node"] in {"n1", "n2", "n3"} for op in oks)
    described = [op["value"] for op in oks if op["f"] == "describe-cluster"]
    assert all(d["brokers"] == [1, 2, 3] and d["cluster_id"] for d in described)


def test_topics_created_ok_are_listed_at_the_end_unless_deleted(admin_run):
    ops = read_history(admin_run.run_dir).ops
    created, gone, unsure = set(), set(), set()
    for op in ops:
        if op["f"] not in ("create-topic", "delete-topic") or op["type"] == "invoke":
            continue
        topic = op["value"]["topic"]
        if op["type"] == "info":
            unsure.add(topic)
        elif op["type"] == "ok":
            (created if op["f"] == "create-topic" else gone).add(topic)
    assert created, "no topic was created"
    listings = [op for op in ops if op["f"] == "list-topics" and op["type"] == "ok"]
    assert {op["node"] for op in listings} == {"n1", "n2", "n3"}
    for op in listings:
        listed = {t for t in op["value"]["topics"] if t.startswith("adm-")}
        assert (created - gone - unsure) <= listed, op["node"]
        assert not (listed & (gone - unsure)), op["node"]
