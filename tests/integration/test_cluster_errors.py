"""Mistakes and failures while bringing a cluster up: one clear message, nothing left behind."""

import docker.types
import pytest

from clusters.cluster import UpOptions
from clusters.docker_labels import LABEL
from clusters.docker_lifecycle import DockerCluster
from clusters.errors import ClusterError
from clusters.topology import build_topology

QUIET = {"say": lambda m: None}


def test_unknown_version_is_refused_before_anything_is_made(docker_client):
    dc = DockerCluster(docker_client, "it-badversion")
    with pytest.raises(ClusterError, match=r"unknown Kafka version 3\.9\.99"):
        dc.up(build_topology("kraft-combined", cluster=dc.cluster), UpOptions("3.9.99"), **QUIET)
    assert not dc.exists()


def test_subnet_clash_names_the_subnet(docker_client):
    subnet = "10.213.13.0/24"
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=subnet)])
    squatter = docker_client.networks.create(
        "kchaos-it-squatter", internal=True, ipam=ipam, labels={LABEL: "1"}
    )
    dc = DockerCluster(docker_client, "it-clash")
    try:
        with pytest.raises(ClusterError, match=r"subnet 10\.213\.13\.0/24 clashes"):
            topo = build_topology("kraft-combined", cluster=dc.cluster, subnet=subnet)
            dc.up(topo, UpOptions("3.9"), **QUIET)
        assert not dc.exists()
    finally:
        squatter.remove()


def test_a_node_that_dies_at_start_fails_up_with_its_last_log_lines(docker_client, tmp_path):
    dc = DockerCluster(docker_client, "it-tinyheap")
    topo = build_topology("kraft-combined", cluster=dc.cluster, subnet="10.213.14.0/24")
    # A 2 MB heap cannot even start the JVM: the container exits at once.
    with pytest.raises(ClusterError) as caught:
        options = UpOptions("3.9", heap_mb=2, ready_timeout=120, logs_on_failure=tmp_path)
        dc.up(topo, options, **QUIET)
    message = str(caught.value)
    assert "the process exited" in message and "--- last log lines of n" in message
    assert "heap" in message.lower()
    assert not dc.exists(), "a failed up must not leave a half-made cluster"
    # Each node's whole log stays for the run directory, the configuration it started with
    # beside it, as a run collects them.
    for node in ("n1", "n2", "n3"):
        kept = tmp_path / "logs" / node
        assert (kept / "stdout.log").is_file() and (kept / "kafka" / "server.properties").is_file()
        marker = f"--- last log lines of {node} ---\n"
        if marker in message:
            # The line the error ends this node's tail with is in the log kept whole.
            last = message.split(marker, 1)[1].split("\n--- ", 1)[0].strip().splitlines()[-1]
            assert last in (kept / "stdout.log").read_text()


def test_a_second_cluster_with_the_same_name_is_refused(docker_client):
    dc = DockerCluster(docker_client, "it-twice")
    docker_client.networks.create(
        "kchaos-it-twice", internal=True, labels={LABEL: "1", f"{LABEL}.cluster": "it-twice"}
    )
    try:
        with pytest.raises(ClusterError, match="already exists"):
            dc.up(build_topology("kraft-combined", cluster="it-twice"), UpOptions("3.9"), **QUIET)
    finally:
        dc.remove()
    assert not dc.exists()
