"""The cluster handle protocol (clusters/cluster.py) and its factory (clusters/handles.py),
without Docker or SSH: both node kinds implement every member, the factory opens each from where
its cluster lives, and each kind answers for itself what the harness once asked by its class
(its topology, its releases, a cluster removed under a run)."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import docker.errors
import pytest
import yaml

import clusters.engine
from clusters.cluster import ClusterHandle, ClusterInfo, UpOptions
from clusters.docker_lifecycle import DockerCluster
from clusters.errors import ClusterError
from clusters.handles import list_clusters, open_cluster
from clusters.inventory import parse_inventory
from clusters.ssh_cluster import SshCluster
from clusters.topology import build_topology

KINDS = (DockerCluster, SshCluster)


def _members() -> list[str]:
    """Every member the protocol declares: its methods and its annotated attributes."""
    names = set()
    for base in ClusterHandle.__mro__:
        if base is object or getattr(base, "_is_protocol", False) is False:
            continue
        names |= {n for n in vars(base) if not n.startswith("_")}
        names |= set(getattr(base, "__annotations__", {}))
    return sorted(names)


def _inventory_data() -> dict:
    return {
        "cluster": "lab",
        "known_hosts": "kh",
        "defaults": {"user": "ops", "key": "id"},
        "hosts": [
            {"name": f"n{i}", "address": f"192.0.2.{10 + i}", "role": "broker,controller"}
            for i in (1, 2, 3)
        ],
    }


def _ssh(tmp_path: Path) -> SshCluster:
    return SshCluster(parse_inventory(_inventory_data(), tmp_path, tmp_path / "hosts.yaml"))


@pytest.fixture
def no_engine(monkeypatch):
    """An engine that is never asked: a handle must not talk to Docker until asked."""
    monkeypatch.setattr(clusters.engine, "client", lambda: None)


def test_the_protocol_declares_what_the_harness_asks():
    assert _members() == [
        "cli_option",
        "close",
        "cluster",
        "dist",
        "down",
        "exists",
        "fixed_topology",
        "info",
        "install_releases",
        "missing",
        "nodes",
        "remove",
        "says_removed",
        "tools",
        "up",
    ]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_each_kind_implements_every_method_with_the_protocols_parameters(kind):
    for name in _members():
        declared = inspect.getattr_static(ClusterHandle, name, None)
        if not callable(declared):
            continue  # an attribute: checked on instances below
        own = getattr(kind, name, None)
        assert callable(own), f"{kind.__name__} lacks {name}"
        assert list(inspect.signature(own).parameters) == list(
            inspect.signature(declared).parameters
        ), f"{kind.__name__}.{name}"


def test_both_kinds_are_cluster_handles(tmp_path: Path):
    assert isinstance(DockerCluster(None, "c1"), ClusterHandle)  # type: ignore[arg-type]
    assert isinstance(_ssh(tmp_path), ClusterHandle)


def test_the_factory_opens_a_docker_cluster_by_its_name(no_engine):
    handle = open_cluster("c1")
    assert isinstance(handle, DockerCluster) and handle.cluster == "c1"
    assert handle.cli_option() == "--name c1"


def test_without_an_engine_the_factory_says_so_once(monkeypatch):
    def away():
        raise ClusterError("Docker is not running")

    monkeypatch.setattr(clusters.engine, "client", away)
    with pytest.raises(ClusterError, match="Docker is not running"):
        open_cluster("c1")


def test_the_factory_opens_an_inventorys_hosts_which_name_the_cluster(tmp_path: Path, monkeypatch):
    def no_docker():
        raise AssertionError("the SSH path asked Docker")

    monkeypatch.setattr(clusters.engine, "client", no_docker)
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(_inventory_data()))
    handle = open_cluster("ignored", path)
    assert isinstance(handle, SshCluster) and handle.cluster == "lab"
    assert not handle.inventory.accept_new_host_keys
    assert handle.cli_option() == f"--hosts {path.resolve()}"
    accepting = open_cluster(hosts=path, accept_new_host_keys=True)
    assert isinstance(accepting, SshCluster) and accepting.inventory.accept_new_host_keys


def test_list_clusters_reads_the_labels_of_this_engine(monkeypatch):
    class Listing:
        def __init__(self, items):
            self.items = items

        def list(self, **kwargs):
            return self.items

    client = SimpleNamespace(
        containers=Listing([SimpleNamespace(labels={"kchaos.cluster": "b"})]),
        networks=Listing([SimpleNamespace(attrs={"Labels": {"kchaos.cluster": "a"}})]),
    )
    monkeypatch.setattr(clusters.engine, "client", lambda: client)
    assert list_clusters() == ["a", "b"]


def test_only_the_hosts_fix_the_topology(tmp_path: Path):
    assert DockerCluster(None, "c1").fixed_topology() is None  # type: ignore[arg-type]
    topo = _ssh(tmp_path).fixed_topology("static")
    assert topo is not None and topo.kind == "kraft-combined"
    assert [n.name for n in topo.nodes] == ["n1", "n2", "n3"]


def test_docker_needs_no_release_installed_and_a_topology_to_come_up():
    dc = DockerCluster(None, "c1")  # type: ignore[arg-type]
    dc.install_releases([SimpleNamespace(version="4.0.0")])  # type: ignore[list-item]
    with pytest.raises(ClusterError, match="topology"):
        dc.up(None, UpOptions("3.9"))


def _api_error(status: int, explanation: str) -> docker.errors.APIError:
    response = SimpleNamespace(status_code=status, reason="", url="")
    return docker.errors.APIError("error", response=response, explanation=explanation)


def test_docker_says_removed_for_a_gone_or_removing_container_only():
    dc = DockerCluster(None, "c1")  # type: ignore[arg-type]
    gone = _api_error(404, "No such container: kchaos-c1-n1")
    assert dc.says_removed(gone) == "Docker: No such container: kchaos-c1-n1"
    removing = _api_error(409, "removal of container abc is already in progress")
    assert dc.says_removed(removing) == "Docker: removal of container abc is already in progress"
    assert dc.says_removed(_api_error(409, "name kchaos-c1-n1 is already in use")) is None
    assert dc.says_removed(ClusterError("x")) is None and dc.says_removed(None) is None


def test_ssh_never_takes_an_error_for_a_removal(tmp_path: Path):
    assert _ssh(tmp_path).says_removed(_api_error(404, "No such container")) is None


class _Labelled(DockerCluster):
    def __init__(self, present: list[str], network: bool, away: bool = False) -> None:
        super().__init__(None, "c1")  # type: ignore[arg-type]
        self.present, self.network, self.away = present, network, away

    def containers(self, all: bool = True) -> list:
        if self.away:
            raise docker.errors.DockerException("engine away")
        return [SimpleNamespace(labels={"kchaos.node": n}) for n in self.present]

    def networks(self) -> list:
        return [object()] if self.network else []


def test_docker_says_what_of_the_cluster_is_missing():
    info = ClusterInfo(build_topology("kraft-combined", cluster="c1"), "3.9.2", "fast", "id")
    assert _Labelled(["n1", "n2", "n3"], True).missing(info) is None
    assert _Labelled(["n2"], False).missing(info) == "containers of n1, n3 gone, its network gone"
    # An engine that does not answer proves no removal.
    assert _Labelled([], False, away=True).missing(info) is None


def test_up_options_are_one_frozen_value_with_the_defaults_both_kinds_had():
    options = UpOptions("3.9")
    assert (options.timing, options.heap_mb, options.wait, options.ready_timeout) == (
        "default",
        256,
        True,
        240.0,
    )
    with pytest.raises(AttributeError):
        options.version = "4.0"  # type: ignore[misc]
