"""Docker's client networks (clusters/docker_client_net.py) without Kafka: a process started
behind a slot's prefix is on the cluster's network, a cut drops its packets (a connection
attempt times out instead of being refused), the heal mends it, and the cluster's removal takes
the containers with the network. The "node" is a sleeping container of the node image, so no
Kafka is needed: a few seconds."""

from __future__ import annotations

import subprocess
import sys

import docker

from clusters.cluster import ClusterInfo
from clusters.docker_labels import LABEL, network_name
from clusters.docker_lifecycle import DockerCluster
from clusters.image import ensure_image
from clusters.topology import build_topology

NAME = "kcnets"
SUBNET = "10.213.195.0/24"
# Connects to the node's port 9 (nothing listens): refused at once when the packets pass,
# a timeout when they are dropped. Prints which.
PROBE = (
    "import socket,sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], 9), timeout=3)\n"
    "except ConnectionRefusedError:\n"
    "    print('refused')\n"
    "except OSError as e:\n"
    "    print('timeout' if 'timed out' in str(e) else repr(e))\n"
)


def _probe(prefix: list[str], ip: str) -> str:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", PROBE, ip], capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip() or done.stderr.strip()


def test_a_slots_network_is_the_clusters_and_a_cut_drops_only_its_packets(docker_client):
    topo = build_topology("kraft-combined", cluster=NAME, subnet=SUBNET)
    info = ClusterInfo(topology=topo, version="4.4.0", timing="fast", cluster_id="x")
    dc = DockerCluster(docker_client, NAME)
    dc.remove()
    node = topo.nodes[0]
    try:
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=SUBNET)])
        docker_client.networks.create(
            network_name(NAME),
            internal=True,
            ipam=ipam,
            labels={LABEL: "1", f"{LABEL}.cluster": NAME},
        )
        api = docker_client.api
        created = api.create_container(
            ensure_image(docker_client, say=lambda m: None),
            command=["sleep", "infinity"],
            labels={LABEL: "1", f"{LABEL}.cluster": NAME},
            host_config=api.create_host_config(network_mode=network_name(NAME)),
            networking_config=api.create_networking_config(
                {network_name(NAME): api.create_endpoint_config(ipv4_address=node.ip)}
            ),
        )
        api.start(created["Id"])
        nets = dc.client_nets(info, [0, 1])
        assert sorted(nets) == [0, 1]
        assert _probe(nets[0].prefix(), node.ip) == "refused"  # on the cluster's network
        nets[0].cut()
        assert _probe(nets[0].prefix(), node.ip) == "timeout"
        assert _probe(nets[1].prefix(), node.ip) == "refused"  # the other slot is not cut
        # What a harness that died leaves is mended by the heal (nemesis/heal.py heal_cluster
        # asks the cluster this), and only once.
        assert dc.mend_client_nets() == ["mended the cut of slot 0's client network"]
        assert _probe(nets[0].prefix(), node.ip) == "refused"
        assert dc.mend_client_nets() == []
        assert len(dc.client_containers()) == 2
    finally:
        dc.remove()
    assert dc.client_containers() == [] and not dc.exists()
