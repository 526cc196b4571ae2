"""`kchaos run` with the real partition and kill packages on kraft-combined: faults land, are
recorded, are healed, nothing acknowledged is lost, and the lease liveness checks raise no false
alarm over the real kills and partitions.

Seed 6 gives, at 8 s intervals: kill active-controller, partition random-halves, partition
isolate-active-controller, and a kill of the active controller still on when the time limit
comes, so the end-of-run heal has a fault to undo. The cluster is kept so the test can look for
leftovers itself, then removed.
"""

from __future__ import annotations

import json

import pytest

from clusters.docker_lifecycle import DockerCluster
from history.reader import read_history
from nemesis.heal import heal_cluster
from tests.integration.runs import quiet_run

NAME = "e2e-run-it"
SUBNET = "10.213.73.0/24"
SEED = 6


# Slow (nightly) to keep make test under 45 min: test_run_lease, test_campaign and the fault
# tests of each package run faults, heals and final reads in make test.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished_run(docker_client, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        SEED,
        results,
        time_limit=60,
        nemesis=["partition", "kill"],
        rate=40,
        keep_cluster=True,
        # Taken while the kept cluster is still up, before anything else touches it.
        inspect=lambda dc: {"heal_cluster": heal_cluster(dc), "nodes": _node_state(dc)},
    )
    yield done.result, done.plan, done.inspected


def _node_state(dc: DockerCluster) -> dict[str, dict[str, object]]:
    out = {}
    for name, node in dc.nodes().items():
        running = node.is_running()
        out[name] = {
            "running": running,
            "paused": running and node.is_paused_by_signal(),
            "iptables": node.exec(["iptables", "-S"]).stdout if running else "",
        }
    return out


def test_the_plan_has_both_packages_and_a_fault_on_at_the_end(finished_run):
    _, plan, _ = finished_run
    starts = [(s.fault, s.kind) for s in plan.faults if s.action == "start"]
    assert {f for f, _ in starts} == {"partition", "kill"}
    assert plan.faults[-1].action == "start", "the last fault is left for the heal"


def test_history_has_client_ops_and_every_fault_as_a_nemesis_op(finished_run):
    result, plan, _ = finished_run
    ops = read_history(result.run_dir).ops
    ok = [op for op in ops if op["type"] == "ok"]
    assert sum(op["f"] == "send" for op in ok) > 10 and sum(op["f"] == "poll" for op in ok) > 5
    nem = [op for op in ops if op["process"] == "nemesis" and op["type"] != "invoke"]
    steps = [op for op in nem if op["f"] != "heal"]
    assert [op["f"] for op in steps] == [f"{s.action}-{s.fault}" for s in plan.faults]
    for op in steps:
        # ok, or fail with a reason (a role that could not be named at that moment)
        assert op["type"] == "ok" or (op["type"] == "fail" and op["error"]), op
    kills = [op["value"] for op in steps if op["f"] == "start-kill" and op["type"] == "ok"]
    assert kills and all(k["signal"] == "SIGKILL" and k["targets"] for k in kills)
    parts = [op["value"] for op in steps if op["f"] == "start-partition" and op["type"] == "ok"]
    assert parts and all(p["rules"] for p in parts)
    heals = [op for op in nem if op["f"] == "heal"]
    assert [op["type"] for op in heals] == ["ok"]
    assert any("started exited node" in a for a in heals[0]["value"]["actions"])
    timeline = json.loads((result.run_dir / "nemesis.json").read_text())
    assert len(timeline["timeline"]) == len(plan.faults)


def test_no_fault_is_left_after_the_run(finished_run):
    _, _, leftovers = finished_run
    assert leftovers["heal_cluster"] == [], "heal_cluster found something still in place"
    for name, state in leftovers["nodes"].items():
        assert state["running"] and not state["paused"], (name, state)
        assert "KCHAOS" not in state["iptables"], (name, state["iptables"])


def test_every_acknowledged_send_is_read_in_the_final_phase(finished_run):
    result, _, _ = finished_run
    assert result.exit_code == 0, result.summary
    ops = read_history(result.run_dir).ops
    heal_at = max(op["index"] for op in ops if op["f"] == "heal")
    acked = {}
    for op in ops:
        if op["type"] == "ok" and op["f"] in ("send", "txn"):
            for micro in op["value"]:
                if micro[0] == "send":
                    acked[micro[2][1]] = micro[1]
    final = set()
    for op in ops:
        if op["index"] > heal_at and op["f"] == "poll" and op["type"] == "ok":
            for key, pairs in op["value"][0][1].items():
                final |= {(int(key), value) for _, value in pairs}
    assert acked, "no send was acknowledged"
    missing = sorted((k, v) for v, k in acked.items() if (k, v) not in final)
    assert not missing, f"acknowledged but not read after the heal: {missing[:5]}"
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["final_reads"]["complete"] and run["final_reads"]["missing"] == []


def test_lease_liveness_stays_silent_on_real_kills_and_partitions(finished_run):
    """Neither side of the lease (checkers/families/metadata_log/liveness.py) is reported broken.
    The 8 s faults here are judged only when they spare the leader (a new leader's fresh lease
    needs ~3 s + 5 s), which is up to the run: test_run_lease.py holds faults long enough."""
    result, _, _ = finished_run
    results = json.loads((result.run_dir / "results.json").read_text())
    kinds = ("dead-broker-not-fenced", "spurious-fence")
    assert [f for f in results["findings"] if f["kind"] in kinds] == []
    stats = results["stats"]
    assert stats["lease_obligations_met"] == stats["lease_obligations"], stats
    assert stats["lease_fences_judged"] > 0, stats
