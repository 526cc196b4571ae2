"""Callers take any node kind that has the capabilities they use, and refuse one that lacks a
capability they cannot do without, with one error naming the node and what it lacks."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from clusters import capabilities as caps
from clusters.capabilities import MissingCapability
from clusters.cluster import ClusterInfo
from clusters.collect import collect_cluster
from clusters.docker_node import DockerNode
from clusters.errors import ClusterError
from clusters.jmx import JmxUnavailable
from clusters.readiness import wait_ready
from clusters.status import cluster_status, node_status, process_state
from clusters.topology import NodeSpec, build_topology
from history.format import CLUSTER_JSON, LOGS_DIR, METADATA_DIR, NODE_LOG

TOPO = build_topology("kraft-combined", cluster="fake")
INFO = ClusterInfo(TOPO, "3.9.1", "fast", "cluster-id")


class Named:
    """Identity only: the ``Node`` protocol and nothing else."""

    def __init__(self, spec: NodeSpec):
        self.spec = spec

    name = property(lambda self: self.spec.name)
    ip = property(lambda self: self.spec.ip)


class ProcessOnly(Named):
    """Can start and kill its process, nothing more: no exec, files, logs or pause."""

    def __init__(self, spec: NodeSpec, running: bool = True):
        super().__init__(spec)
        self.running = running
        self.starts = 0

    def start(self) -> None:
        self.running = True
        self.starts += 1

    def stop(self, timeout: float = 30) -> None:
        self.running = False

    def kill(self) -> None:
        self.running = False

    def is_running(self) -> bool:
        return self.running


class FilesAndLogs(Named):
    """Can hand over its files and output but cannot say whether its process runs."""

    def put_file(self, path: str, content: bytes | str, mode: int = 0o644) -> None:
        raise AssertionError("collection writes nothing into a node")

    def copy_dir_out(self, path: str, dest: Path) -> None:
        (dest / Path(path).name).mkdir(parents=True, exist_ok=True)

    def copy_files_out(
        self, paths: Sequence[str], dest: Path, keep: Callable[[str], bool]
    ) -> list[Path]:
        for path in paths:
            (dest / Path(path).name).mkdir(parents=True, exist_ok=True)
        return []

    def logs(self, tail: int | None = None) -> str:
        return f"{self.name} says hello\n"


class Gone(ProcessOnly):
    def is_running(self) -> bool:
        raise ClusterError(f"node {self.name}: gone")


class Paused(ProcessOnly):
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def is_paused_by_signal(self) -> bool:
        return True


class Frozen(ProcessOnly):
    def is_frozen(self) -> bool:
        return True


class FakeCluster:
    """The ``Cluster`` protocol over a dict of handles, no Docker."""

    def __init__(self, handles: dict):
        self.handles = handles

    def info(self) -> ClusterInfo:
        return INFO

    def nodes(self, info: ClusterInfo | None = None) -> dict:
        return self.handles

    def dist(self, info: ClusterInfo):
        return None  # only decoding needs jars, and these nodes hand over no segments


def cluster_of(kind: type, **kw) -> FakeCluster:
    return FakeCluster({n.name: kind(n, **kw) for n in TOPO.nodes})


@pytest.fixture
def no_jmx(monkeypatch):
    def unavailable(ip, roles, timeout=2.0):
        raise JmxUnavailable(f"{ip}: no agent in a test")

    monkeypatch.setattr("clusters.status.sample_kafka", unavailable)


def test_docker_nodes_have_every_capability_without_asking_docker():
    node = DockerNode(None, "kchaos-fake-n1", TOPO.nodes[0])  # type: ignore[arg-type]
    for capability in (caps.Node, caps.Exec, caps.Files, caps.Process, caps.Pause, caps.Logs):
        assert isinstance(node, capability), capability.__name__
    assert isinstance(node, caps.Frozen)
    assert isinstance(node, caps.Controllable) and isinstance(node, caps.Collectable)


def test_capabilities_are_asked_one_by_one():
    node = ProcessOnly(TOPO.nodes[0])
    assert isinstance(node, caps.Process)
    assert caps.lacking(node, (caps.Exec, caps.Files, caps.Process, caps.Pause, caps.Logs)) == [
        "Exec",
        "Files",
        "Pause",
        "Logs",
    ]
    assert not isinstance(node, caps.Controllable)


def test_status_takes_a_node_that_can_only_run_and_never_calls_it_paused(no_jmx):
    cluster = cluster_of(ProcessOnly)
    cluster.handles["n2"].running = False
    status = cluster_status(cluster, check_paused=True)  # type: ignore[arg-type]
    assert [(n["name"], n["process"]) for n in status["nodes"]] == [
        ("n1", "running"),
        ("n2", "exited"),
        ("n3", "running"),
    ]
    assert status["nodes"][0]["error"] == f"{TOPO.nodes[0].ip}: no agent in a test"


def test_status_reports_what_optional_capabilities_let_a_node_say():
    spec = TOPO.nodes[0]
    assert process_state(Paused(spec), check_paused=True) == "paused"
    assert process_state(Paused(spec), check_paused=False) == "running"
    assert process_state(Frozen(spec), check_paused=True) == "frozen"
    assert process_state(Gone(spec), check_paused=True) == "missing"
    assert process_state(ProcessOnly(spec, running=False), check_paused=True) == "exited"


def test_status_refuses_a_node_that_cannot_say_whether_it_runs():
    with pytest.raises(MissingCapability) as cluster_wide:
        cluster_status(cluster_of(FilesAndLogs))  # type: ignore[arg-type]
    assert str(cluster_wide.value) == (
        "cluster status needs Process: n1 (FilesAndLogs) lacks Process; "
        "n2 (FilesAndLogs) lacks Process; n3 (FilesAndLogs) lacks Process"
    )
    with pytest.raises(MissingCapability, match=r"n1 \(Named\) lacks Process"):
        node_status(Named(TOPO.nodes[0]))  # type: ignore[arg-type]


def test_readiness_takes_a_node_without_logs_and_says_it_has_none(no_jmx):
    cluster = cluster_of(ProcessOnly)
    cluster.handles["n3"].running = False
    with pytest.raises(ClusterError) as lost:
        wait_ready(cluster, INFO, timeout=5)  # type: ignore[arg-type]
    assert str(lost.value) == (
        "cluster fake lost n3: the process exited during start\n"
        "--- last log lines of n3 ---\n"
        "(no logs: a ProcessOnly node has no Logs capability)"
    )


def test_collection_refuses_a_node_without_files_or_logs_before_writing(tmp_path):
    with pytest.raises(MissingCapability) as refused:
        collect_cluster(cluster_of(ProcessOnly), tmp_path / "run")  # type: ignore[arg-type]
    assert str(refused.value) == (
        "collecting a cluster needs Files, Logs: n1 (ProcessOnly) lacks Files, Logs; "
        "n2 (ProcessOnly) lacks Files, Logs; n3 (ProcessOnly) lacks Files, Logs"
    )
    assert not (tmp_path / "run").exists()


def test_collection_takes_a_node_that_only_hands_over_files_and_logs(tmp_path):
    said: list[str] = []
    collect_cluster(cluster_of(FilesAndLogs), tmp_path, say=said.append)  # type: ignore[arg-type]
    assert json.loads((tmp_path / CLUSTER_JSON).read_text())["cluster"] == "fake"
    assert (tmp_path / LOGS_DIR / "n2" / NODE_LOG).read_text() == "n2 says hello\n"
    assert sorted(p.name for p in (tmp_path / METADATA_DIR).glob("*.txt")) == [
        "n1.txt",
        "n2.txt",
        "n3.txt",
    ]
    assert said == [f"collected logs and metadata logs into {tmp_path}"]


def test_the_kill_nemesis_needs_nothing_but_process():
    from nemesis.api import FaultContext
    from nemesis.process import KillNemesis, restart_exited

    handles = {n.name: ProcessOnly(n) for n in TOPO.nodes}
    ctx = FaultContext(topology=TOPO, nodes=handles)  # type: ignore[arg-type]
    KillNemesis().act(handles["n2"])
    assert not handles["n2"].is_running()
    assert restart_exited(ctx) == ["n2"]
    assert handles["n2"].is_running() and handles["n2"].starts == 1
