"""Real clusters for integration tests: one per module, torn down (and checked gone) after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clusters.cluster import ClusterInfo, UpOptions
from clusters.docker_lifecycle import DockerCluster
from clusters.engine import client
from clusters.topology import build_topology


def pytest_collection_modifyitems(items):
    # Every integration test needs Docker but those marked `spark`, which start only Spark
    # daemons on this machine (test_spark_cluster.py): `-m "not docker"` runs them too.
    for item in items:
        if "tests/integration" in str(item.fspath) and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_client():
    return client()


def bring_up(
    docker_client, name: str, kind: str, subnet: str, tmp_path_factory, **kw
) -> Iterator[tuple[DockerCluster, ClusterInfo]]:
    dc = DockerCluster(docker_client, name)
    dc.remove()  # leftovers of an interrupted earlier test run
    topo = build_topology(kind, cluster=name, subnet=subnet, brokers=kw.pop("brokers", 3))
    info = dc.up(topo, UpOptions(kw.pop("version", "3.9"), timing="fast", **kw), say=lambda m: None)
    yield dc, info
    dc.down(collect=tmp_path_factory.mktemp(f"{name}-collect"), say=lambda m: None)
    assert not dc.containers() and not dc.networks(), "teardown left containers or networks"
