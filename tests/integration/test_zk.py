"""A real ZooKeeper-mode cluster: produce/consume, and /controller names a live broker."""

import pytest

from clusters.status import cluster_status
from tests.integration.conftest import bring_up
from tests.integration.kafka_io import consume_all, create_topic, produce


@pytest.fixture(scope="module")
def cluster(docker_client, tmp_path_factory):
    yield from bring_up(docker_client, "it-zk", "zk", "10.213.11.0/24", tmp_path_factory)


def test_zk_cluster_serves_writes_and_names_a_live_controller(cluster):
    dc, info = cluster
    bootstrap = info.topology.bootstrap_servers()
    create_topic(bootstrap, "zk-topic")
    values = [f"z{i}" for i in range(300)]
    produce(bootstrap, "zk-topic", values)
    assert sorted(consume_all(bootstrap, "zk-topic", 300)) == sorted(values)

    st = cluster_status(dc, info)
    zk = st["zookeeper"]
    live = {
        n["node_id"] for n in st["nodes"] if "broker" in n["roles"] and n["process"] == "running"
    }
    assert zk["controller"]["brokerid"] in live
    assert zk["controller_epoch"] >= 1
    assert zk["broker_ids"] == sorted(live)
