from clusters.readiness import problems
from clusters.status import quorum_view


def kafka_node(
    name, node_id, leader=1, epoch=3, state="RUNNING", active=0, roles=("broker", "controller")
):
    raft = (
        {
            "state": "leader" if leader == node_id else "follower",
            "leader": leader,
            "epoch": epoch,
            "high_watermark": 10,
        }
        if "controller" in roles
        else None
    )
    return {
        "name": name,
        "roles": list(roles),
        "node_id": node_id,
        "process": "running",
        "jmx": {"raft": raft, "broker_state": state, "active_controller_count": active},
    }


def status_of(nodes):
    return {"nodes": nodes, "quorum": quorum_view(nodes)}


def test_a_quorum_with_one_agreed_leader_and_running_brokers_is_ready():
    nodes = [kafka_node("n1", 1, active=1), kafka_node("n2", 2), kafka_node("n3", 3)]
    assert problems(status_of(nodes)) == []


def test_disagreeing_controllers_are_not_ready_and_each_view_is_named():
    nodes = [
        kafka_node("n1", 1, active=1),
        kafka_node("n2", 2),
        kafka_node("n3", 3, leader=3, epoch=4),
    ]
    found = problems(status_of(nodes))
    assert any("do not agree" in p and "n3: leader 3 epoch 4" in p for p in found)


def test_a_fenced_broker_is_not_ready():
    nodes = [
        kafka_node("n1", 1, active=1),
        kafka_node("n2", 2, state="RECOVERY"),
        kafka_node("n3", 3),
    ]
    assert problems(status_of(nodes)) == ["n2: broker state RECOVERY"]


def test_no_leader_yet_is_not_ready():
    nodes = [kafka_node(f"n{i}", i, leader=-1, epoch=0) for i in (1, 2, 3)]
    assert problems(status_of(nodes))


def test_two_active_controllers_are_not_ready():
    nodes = [kafka_node("n1", 1, active=1), kafka_node("n2", 2, active=1), kafka_node("n3", 3)]
    assert any("active controllers" in p for p in problems(status_of(nodes)))


def test_zk_mode_needs_a_controller_among_its_brokers():
    brokers = [kafka_node(f"b{i}", i, roles=("broker",)) for i in (1, 2)]
    zk = {"controller": {"brokerid": 7}, "controller_epoch": 1, "broker_ids": [1, 2]}
    found = problems({"nodes": brokers, "zookeeper": zk})
    assert found == ["/controller names 7, not a broker of this cluster"]
    zk["controller"] = {"brokerid": 2}
    assert problems({"nodes": brokers, "zookeeper": zk}) == []


def test_a_migrating_clusters_zookeeper_controller_broker_is_not_a_second_active_controller():
    # Before the KRaft controller takes /controller over, a ZooKeeper-mode broker is ZooKeeper's
    # controller and reports ActiveControllerCount 1 beside the active KRaft controller.
    controllers = [
        kafka_node(f"c{i}", 3000 + i, leader=3001, roles=("controller",)) for i in (1, 2, 3)
    ]
    controllers[0]["jmx"]["active_controller_count"] = 1
    brokers = [kafka_node(f"b{i}", i, roles=("broker",)) for i in (1, 2, 3)]
    brokers[1]["jmx"]["active_controller_count"] = 1
    status = status_of(controllers + brokers)
    assert status["quorum"]["active_controllers"] == ["c1"]
    assert problems(status) == []
    # Two KRaft controllers active is still a problem.
    controllers[1]["jmx"]["active_controller_count"] = 1
    assert "active controllers: ['c1', 'c2']" in problems(status_of(controllers + brokers))


def test_a_node_kept_down_is_left_out_of_the_quorum_and_broker_states():
    nodes = [kafka_node("n1", 1, active=1), kafka_node("n2", 2), kafka_node("n3", 3)]
    nodes[2]["process"] = "exited"
    nodes[2]["jmx"] = {"raft": None, "broker_state": None, "active_controller_count": None}
    status = status_of(nodes)
    assert "n3: process exited" in problems(status)
    assert problems(status, down={"n3"}) == []
    # What remains must still be ready: a leaderless rest is not.
    nodes[0]["jmx"]["raft"]["leader"] = -1
    nodes[1]["jmx"]["raft"]["leader"] = -1
    assert problems(status_of(nodes), down={"n3"})


def test_zk_mode_without_a_kept_down_broker_wants_the_others_registered():
    brokers = [kafka_node(f"b{i}", i, roles=("broker",)) for i in (1, 2, 3)]
    brokers[2]["process"] = "exited"
    zk = {"controller": {"brokerid": 1}, "controller_epoch": 1, "broker_ids": [1, 2]}
    assert problems({"nodes": brokers, "zookeeper": zk}, down={"b3"}) == []
    zk["broker_ids"] = [1, 2, 3]  # its registration not yet expired: wait for it
    assert problems({"nodes": brokers, "zookeeper": zk}, down={"b3"})


class _Statuses:
    """cluster_status as a sequence of observed statuses (the last one repeats)."""

    def __init__(self, *statuses):
        self.statuses = list(statuses)

    def __call__(self, cluster, info, check_paused=True):
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]


def _three(dead: str | None = None, starting: str | None = None):
    nodes = [kafka_node("n1", 1, active=1), kafka_node("n2", 2), kafka_node("n3", 3)]
    for n in nodes:
        if n["name"] in (dead, starting):
            n["jmx"] = {"raft": None, "broker_state": None, "active_controller_count": None}
        if n["name"] == dead:
            n["process"] = "exited"
    return status_of(nodes)


class _Info:
    class topology:
        cluster = "c"


def test_wait_ready_leaves_a_dead_node_it_may_excuse_and_lists_it(monkeypatch):
    from clusters import readiness

    # Restarted by the heal, the node runs a moment, then exits: then the rest is ready.
    monkeypatch.setattr(readiness, "cluster_status", _Statuses(_three(starting="n3"), _three("n3")))
    monkeypatch.setattr(readiness, "POLL_INTERVAL_S", 0)
    asked = []
    status = readiness.wait_ready(
        None, _Info, timeout=5, may_stay_down=lambda n: asked.append(n) or n == "n3"
    )
    assert status["kept_down"] == ["n3"] and asked == ["n3"]


def test_wait_ready_ends_at_a_dead_node_nothing_excuses(monkeypatch):
    import pytest

    from clusters import readiness
    from clusters.errors import ClusterError

    monkeypatch.setattr(readiness, "cluster_status", _Statuses(_three("n2")))
    monkeypatch.setattr(readiness, "log_tails", lambda *a: "")
    with pytest.raises(ClusterError, match="lost n2: the process exited during start"):
        readiness.wait_ready(None, _Info, timeout=5, may_stay_down=lambda n: n == "n3")
