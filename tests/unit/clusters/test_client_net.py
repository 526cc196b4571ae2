"""Where Docker's client networks (clusters/docker_client_net.py) take their addresses: from the
top of the cluster's subnet, never a node's; and who can give client networks at all."""

from __future__ import annotations

import pytest

from clusters.client_net import refusal
from clusters.cluster import ClusterInfo
from clusters.docker_client_net import client_addresses
from clusters.errors import ClusterError
from clusters.topology import build_topology


def _info(subnet: str) -> ClusterInfo:
    topo = build_topology("kraft-combined", cluster="nets", subnet=subnet)
    return ClusterInfo(topology=topo, version="4.4.0", timing="fast", cluster_id="x")


def test_client_addresses_come_from_the_top_of_the_subnet_above_every_node():
    info = _info("10.213.230.0/24")
    assert client_addresses(info, 3) == ["10.213.230.254", "10.213.230.253", "10.213.230.252"]
    nodes = {n.ip for n in info.topology.nodes}
    assert not nodes & set(client_addresses(info, 200))


def test_a_subnet_without_room_above_its_nodes_is_refused_in_one_line():
    info = _info("10.213.230.0/27")  # nodes .11-.13: .14 to .30 are free
    assert client_addresses(info, 17)[-1] == "10.213.230.14"
    with pytest.raises(ClusterError, match="no room for 18 client networks"):
        client_addresses(info, 18)


def test_only_a_cluster_that_gives_client_networks_is_not_refused():
    class _Nets:
        def client_nets(self, info, slots):
            return {}

        def mend_client_nets(self):
            return []

        def remove_client_nets(self):
            return 0

    assert refusal(_Nets()) is None
    said = refusal(object())
    assert said is not None and "only a Docker cluster" in said
