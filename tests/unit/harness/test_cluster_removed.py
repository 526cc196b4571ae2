"""A run whose cluster is removed under it ends with one ClusterRemoved (exit code 252 in
run.json), keeps what it recorded, and says who removed it when the hold's note tells; an error
on an intact cluster stays what it was; a cluster the run did not make is never torn down."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import docker.errors
import pytest

import clusters.docker_lifecycle
import clusters.engine
import harness.run.interpreter as interpreter
from clusters.cluster import ClusterInfo
from clusters.docker_lifecycle import DockerCluster
from clusters.errors import ClusterError
from clusters.hold import ClusterRemoved, note_forced_removal
from clusters.topology import build_topology
from harness.exit_codes import BAD_INPUT_EXIT, CLUSTER_REMOVED_EXIT
from harness.plan import build_plan
from harness.run.interpreter import Live, Run, Up
from harness.run.recorder import Recorder
from harness.spec import RunSpec
from nemesis.api import FaultContext


class FakeCluster(DockerCluster):
    """A Docker cluster whose containers and network are there or not, as the test says: what
    the run asks of it when it fails (``missing``, ``says_removed``) is Docker's own."""

    made: ClassVar[list[FakeCluster]] = []

    def __init__(self, client: object, name: str) -> None:
        super().__init__(client, name)  # type: ignore[arg-type]
        FakeCluster.made.append(self)
        self.name = name
        self.nodes_present = ["n1", "n2", "n3"]
        self.network = True
        self.downs = 0

    def containers(self, all: bool = True) -> list:
        return [SimpleNamespace(labels={"kchaos.node": n}) for n in self.nodes_present]

    def networks(self) -> list:
        return [object()] if self.network else []

    def exists(self) -> bool:
        return bool(self.nodes_present or self.network)

    def remove_all(self) -> None:
        self.nodes_present, self.network = [], False

    def down(self, collect: Path | None = None, say=print) -> int:
        self.downs += 1
        self.remove_all()
        return 0


@pytest.fixture(autouse=True)
def _offline(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(clusters.engine, "client", lambda: None)
    monkeypatch.setattr(clusters.docker_lifecycle, "DockerCluster", FakeCluster)
    monkeypatch.setattr(interpreter, "ensure_dist", lambda v: None)
    FakeCluster.made = []


def _run(tmp_path: Path) -> Run:
    spec = RunSpec.of(cluster="c1", results_dir=str(tmp_path / "results"), time_limit=5)
    # In process: the tests read what the interpreter's own steps did to their fakes.
    return Run(build_plan(spec, 1), say=lambda m: None, show_progress=False, supervise=False)


def _up(run: Run, live: Live) -> Up:
    """What `_bring_up` leaves when the cluster came up: its info and a history being written."""
    topo = build_topology("kraft-combined", cluster="c1")
    info = ClusterInfo(topo, "3.9.2", "fast", "id")
    rec = Recorder(live.run_dir / "history.jsonl", run.run_id)
    rec.record("ok", "send", [["send", 0, [0, 1]]], 0, node="n1")
    live.up = Up(info, FaultContext(topology=topo, nodes={}), rec)
    live.made = True
    return live.up


def _summary(run: Run) -> dict:
    assert run.run_dir is not None
    return json.loads((run.run_dir / "run.json").read_text())


def test_removed_after_it_came_up_keeps_the_history_and_says_what_is_gone(tmp_path, monkeypatch):
    run = _run(tmp_path)

    def bring_up(self: Run, live: Live) -> Up:
        return _up(self, live)

    def set_up(self: Run, live: Live, up: Up):
        live.cluster.nodes_present = ["n2"]  # type: ignore[attr-defined]
        live.cluster.network = False  # type: ignore[attr-defined]
        raise ClusterError("cluster c1 lost n1, n3: the process missing during start")

    monkeypatch.setattr(Run, "_bring_up", bring_up)
    monkeypatch.setattr(Run, "_set_up", set_up)
    with pytest.raises(ClusterRemoved) as ended:
        run.execute()
    msg = str(ended.value)
    assert msg.startswith("cluster 'c1' was removed while the run was using it (")
    assert "containers of n1, n3 gone, its network gone; noticed during setup" in msg
    assert f"what it recorded is kept in {run.run_dir}, not checked" in msg
    summary = _summary(run)
    assert summary["exit_code"] == CLUSTER_REMOVED_EXIT
    assert summary["cluster_removed"]["history_kept"] is True
    assert "lost n1, n3" in summary["cluster_removed"]["error"]
    assert summary["ops"] == {"ok": 1}
    assert (run.run_dir / "history.jsonl").is_file()
    assert json.loads((run.run_dir / "results.json").read_text())["status"] == "not checked"
    # What was left of it is torn down as after any run.
    assert FakeCluster.made[0].downs == 1 and not FakeCluster.made[0].exists()


def test_removed_while_coming_up_by_a_forced_cluster_down_names_who(tmp_path, monkeypatch):
    run = _run(tmp_path)

    def bring_up(self: Run, live: Live) -> Up:
        assert self.hold is not None
        note_forced_removal("c1", self.hold.holder, "kchaos cluster down --force")
        live.cluster.remove_all()  # type: ignore[attr-defined]
        raise docker.errors.APIError(
            "409 Client Error",
            response=SimpleNamespace(status_code=409, reason="", url=""),
            explanation="removal of container abc is already in progress",
        )

    monkeypatch.setattr(Run, "_bring_up", bring_up)
    with pytest.raises(ClusterRemoved) as ended:
        run.execute()
    msg = str(ended.value)
    assert "kchaos cluster down --force, at " in msg and "noticed while bringing it up" in msg
    assert "Docker: removal of container abc is already in progress" in msg
    assert f"it recorded nothing; {run.run_dir}/run.json says so" in msg
    summary = _summary(run)
    assert summary["exit_code"] == CLUSTER_REMOVED_EXIT
    assert summary["cluster_removed"]["history_kept"] is False


def test_an_error_on_an_intact_cluster_stays_itself(tmp_path, monkeypatch):
    run = _run(tmp_path)

    def set_up(self: Run, live: Live, up: Up):
        raise ClusterError("topic creation timed out")

    monkeypatch.setattr(Run, "_bring_up", lambda self, live: _up(self, live))
    monkeypatch.setattr(Run, "_set_up", set_up)
    with pytest.raises(ClusterError, match="topic creation timed out") as ended:
        run.execute()
    assert not isinstance(ended.value, ClusterRemoved)
    summary = _summary(run)
    assert summary["exit_code"] == BAD_INPUT_EXIT and "cluster_removed" not in summary


def test_a_cluster_the_run_did_not_make_is_left_alone(tmp_path):
    run = _run(tmp_path)
    with pytest.raises(ClusterError, match="a cluster named 'c1' already exists"):
        run.execute()  # FakeCluster starts out existing: someone else's
    assert _summary(run)["exit_code"] == BAD_INPUT_EXIT
    assert "cluster_removed" not in _summary(run)
    assert FakeCluster.made[0].downs == 0 and FakeCluster.made[0].exists()
