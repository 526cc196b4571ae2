"""A real 3-node combined KRaft cluster: durable acknowledged writes and controller failover."""

import json

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient

from clusters.status import cluster_status
from harness.cli import main
from tests.integration.conftest import bring_up
from tests.integration.kafka_io import consume_all, create_topic, produce, wait_until

NAME = "it-combined"


@pytest.fixture(scope="module")
def cluster(docker_client, tmp_path_factory):
    yield from bring_up(docker_client, NAME, "kraft-combined", "10.213.10.0/24", tmp_path_factory)


def quorum(dc, info, among=None):
    st = cluster_status(dc, info, check_paused=False)
    views = {k: v for k, v in st["quorum"]["views"].items() if among is None or k in among}
    return st, views


def test_every_controller_reports_the_same_leader_and_epoch_in_status_json(cluster):
    result = CliRunner().invoke(main, ["cluster", "status", "--name", NAME, "--json"])
    assert result.exit_code == 0, result.output
    st = json.loads(result.output)
    views = st["quorum"]["views"]
    assert set(views) == {"n1", "n2", "n3"}
    assert len({(v["leader"], v["epoch"]) for v in views.values()}) == 1
    assert st["quorum"]["agreed"] and len(st["quorum"]["active_controllers"]) == 1
    assert all(n["registered"] and n["fenced"] is False for n in st["nodes"])


def test_1000_acknowledged_writes_are_all_read_back(cluster):
    _, info = cluster
    bootstrap = info.topology.bootstrap_servers()
    create_topic(bootstrap, "durable")
    values = [f"v{i}" for i in range(1000)]
    acked = produce(bootstrap, "durable", values)
    assert len(acked) == 1000
    assert sorted(consume_all(bootstrap, "durable", 1000)) == sorted(values)


# Slow (`make nightly`): make test must stay under 45 min (session 19 rehearsal: 46).
@pytest.mark.slow
def test_killing_the_active_controller_elects_a_new_leader_and_the_node_rejoins(cluster):
    dc, info = cluster
    st, _ = quorum(dc, info)
    old_leader, old_epoch = st["quorum"]["leader"], st["quorum"]["epoch"]
    victim = next(n for n in info.topology.nodes if n.node_id == old_leader)
    survivors = {n.name for n in info.topology.nodes} - {victim.name}
    dc.nodes(info)[victim.name].kill()

    def new_leader():
        _, views = quorum(dc, info, among=survivors)
        pairs = {(v["leader"], v["epoch"]) for v in views.values() if v}
        if len(pairs) == 1 and len(views) == len(survivors) and all(views.values()):
            leader, epoch = next(iter(pairs))
            if leader not in (old_leader, -1, None) and epoch > old_epoch:
                return leader, epoch
        return None

    leader, epoch = wait_until("a new leader among the survivors", new_leader)
    assert epoch > old_epoch and leader != old_leader

    # Until its session times out the killed broker is still registered and unfenced, and a
    # survivor's metadata may name it as the controller to send admin requests to: librdkafka
    # then waits on a node that is gone ("Failed while waiting for controller"). Wait for the
    # fence, as an operator would, before asking the survivors to create a topic.
    alive = ",".join(n.bootstrap for n in info.topology.nodes if n.name in survivors)

    def fenced():
        # Every survivor on its own: one that has not applied the fence yet may still name the
        # victim as the controller (CI lost this test to exactly that after asking only one).
        return all(
            victim.node_id
            not in AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=5).brokers
            for n in info.topology.nodes
            if n.name in survivors
        )

    wait_until(f"the survivors to fence {victim.name}", fenced)
    create_topic(alive, "after-failover", replication=2)
    assert len(produce(alive, "after-failover", [f"x{i}" for i in range(100)])) == 100

    dc.nodes(info)[victim.name].start()

    def rejoined():
        st, views = quorum(dc, info)
        pairs = {(v["leader"], v["epoch"]) for v in views.values() if v}
        node = next(n for n in st["nodes"] if n["name"] == victim.name)
        return len(pairs) == 1 and all(views.values()) and node.get("fenced") is False

    def states() -> str:
        # CI keeps no cluster to look at: say what each container did, and the victim's last log.
        lines = []
        for name, node in dc.nodes(info).items():
            st = node.state()
            lines.append(f"{name}: {st.get('Status')} exit={st.get('ExitCode')}")
        lines.append(dc.nodes(info)[victim.name].logs(tail=60))
        return "\n".join(lines)

    wait_until(
        f"{victim.name} to rejoin as an unfenced broker that agrees on the leader",
        rejoined,
        explain=states,
    )
