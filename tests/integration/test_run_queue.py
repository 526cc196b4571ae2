"""`kchaos run` end to end on a real kraft-combined cluster: a short queue run while a small
in-tree nemesis stops one node (whatever the target says) with SIGSTOP twice; the second time
the interpreter heals it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from history.columnar import read_ops
from history.reader import read_history
from tests.integration.freeze_nemesis import FreezeNemesis
from tests.integration.runs import quiet_run

NAME = "run-it"
SUBNET = "10.213.60.0/24"


@pytest.fixture(scope="module")
def finished_run(docker_client, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        42,
        results,
        time_limit=24,
        nemesis=["pause"],
        nemesis_interval=6,
        rate=40,
        final_timeout=60,
        nemeses={"pause": FreezeNemesis()},
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    yield done.result, done.plan, results


def test_the_run_succeeds(finished_run):
    result, _, _ = finished_run
    assert result.exit_code == 0, result.summary


def test_the_run_directory_holds_everything(finished_run):
    result, plan, results = finished_run
    d: Path = result.run_dir
    assert d.parent == results / "queue" and d.name.endswith("-42")
    assert (results / "latest").resolve() == d.resolve()
    assert (d / "plan.json").read_text() == plan.to_json()
    for name in ("spec.json", "history.jsonl", "history.parquet", "run.json", "results.json"):
        assert (d / name).is_file(), name
    for node in ("n1", "n2", "n3"):
        assert (d / "logs" / node / "stdout.log").stat().st_size > 0
        decoded = (d / "metadata" / f"{node}.txt").read_text()
        assert "REGISTER_BROKER_RECORD" in decoded and '"name":"kchaos-queue"' in decoded
    run = json.loads((d / "run.json").read_text())
    assert run["seed"] == 42 and run["final_reads"]["complete"] is True


def test_history_has_client_and_observer_ops_in_the_documented_shape(finished_run):
    result, _, _ = finished_run
    history = read_history(result.run_dir)
    ops = history.ops
    assert not history.torn_last_line and not history.incomplete
    for op in ops:
        assert {"index", "type", "f", "value", "process", "time", "wall", "node"} <= set(op)
    sends = [op for op in ops if op["f"] == "send" and op["type"] == "ok"]
    polls = [op for op in ops if op["f"] == "poll" and op["type"] == "ok"]
    # Few on a loaded machine with a node stopped; what matters is that they are all read back.
    assert len(sends) > 10 and len(polls) > 5
    observed = {op["node"] for op in ops if op["f"] == "observe" and op["type"] == "ok"}
    assert observed == {"n1", "n2", "n3"}
    samples = [op for op in ops if op["f"] == "observe" and op["type"] == "ok"]
    # With a node stopped, the others may be candidates for a while; all report some state.
    states = {s["value"]["raft"]["state"] for s in samples}
    assert "leader" in states and "follower" in states
    # Raft states of KafkaRaftClient (QuorumState): "voted" is a follower-to-be that has voted.
    raft_states = {
        "leader",
        "follower",
        "candidate",
        "prospective",
        "unattached",
        "voted",
        "resigned",
    }
    assert states <= raft_states
    # The Parquet copy holds the same operations.
    assert read_ops(result.run_dir / "history.parquet").num_rows == len(ops)


def test_every_acknowledged_send_is_read(finished_run):
    result, _, _ = finished_run
    ops = read_history(result.run_dir).ops
    acked = {}
    for op in ops:
        if op["f"] == "send" and op["type"] == "ok":
            ((_, key, (offset, value)),) = op["value"]
            acked[value] = (key, offset)
    read = {}
    for op in ops:
        if op["f"] == "poll" and op["type"] == "ok":
            for key, pairs in op["value"][0][1].items():
                for offset, value in pairs:
                    read[value] = (int(key), offset)
    assert acked, "no send was acknowledged"
    missing = {v: ko for v, ko in acked.items() if read.get(v) != ko}
    assert not missing, f"acknowledged but never read at their offsets: {list(missing.items())[:5]}"


def test_faults_are_nemesis_ops_with_exact_detail_and_are_healed(finished_run):
    result, plan, _ = finished_run
    ops = read_history(result.run_dir).ops
    nem = [op for op in ops if op["process"] == "nemesis"]
    fs = [(op["type"], op["f"]) for op in nem]
    assert fs[:6] == [
        ("invoke", "start-pause"),
        ("ok", "start-pause"),
        ("invoke", "stop-pause"),
        ("ok", "stop-pause"),
        ("invoke", "start-pause"),
        ("ok", "start-pause"),
    ]
    assert [s.action for s in plan.faults] == ["start", "stop", "start"]
    started = nem[1]["value"]
    assert started["signal"] == "SIGSTOP" and started["frozen"][0] in {"n1", "n2", "n3"}
    # The fault still on at the end was undone by heal_all, and the history says so.
    heals = [op for op in nem if op["f"] == "heal" and op["type"] == "ok"]
    assert heals and any(a.startswith("sent SIGCONT") for a in heals[0]["value"]["actions"])
    timeline = json.loads((result.run_dir / "nemesis.json").read_text())
    assert [t["f"] for t in timeline["timeline"]] == ["start-pause", "stop-pause", "start-pause"]
