"""A real KRaft cluster with dedicated controllers comes up and serves produce."""

import pytest

from clusters.status import cluster_status
from tests.integration.conftest import bring_up
from tests.integration.kafka_io import consume_all, create_topic, produce


@pytest.fixture(scope="module")
def cluster(docker_client, tmp_path_factory):
    yield from bring_up(docker_client, "it-kraft", "kraft", "10.213.12.0/24", tmp_path_factory)


def test_dedicated_controllers_elect_one_leader_and_brokers_serve_produce(cluster):
    dc, info = cluster
    st = cluster_status(dc, info)
    assert st["quorum"]["agreed"]
    assert set(st["quorum"]["views"]) == {"c1", "c2", "c3"}
    assert st["quorum"]["active_controllers"][0].startswith("c")
    brokers = [n for n in st["nodes"] if "broker" in n["roles"]]
    assert [b["name"] for b in brokers] == ["b1", "b2", "b3"]
    assert all(b["jmx"]["raft"]["state"] == "observer" for b in brokers)

    bootstrap = info.topology.bootstrap_servers()
    create_topic(bootstrap, "dedicated")
    values = [f"d{i}" for i in range(300)]
    produce(bootstrap, "dedicated", values)
    assert sorted(consume_all(bootstrap, "dedicated", 300)) == sorted(values)


def test_collect_decodes_brokers_metadata_logs_apart_and_they_follow_the_committed_log(
    cluster, tmp_path
):
    from checkers.families.metadata_log.check import check_run_metadata
    from clusters.collect import collect_cluster

    dc, _ = cluster
    collect_cluster(dc, tmp_path, say=lambda m: None)
    voters = sorted(p.stem for p in (tmp_path / "metadata").glob("*.txt"))
    observers = sorted(p.stem for p in (tmp_path / "metadata" / "observers").glob("*.txt"))
    assert (voters, observers) == (["c1", "c2", "c3"], ["b1", "b2", "b3"])
    result = check_run_metadata(tmp_path, [], None, set())
    assert result.checked and result.findings == []
    assert "of 3 voters" in result.notes[0]
