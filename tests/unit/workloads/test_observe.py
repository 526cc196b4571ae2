"""The observer's round: one op in flight, live nodes first, a silent node only probed briefly."""

from __future__ import annotations

import time

import pytest

import workloads.observe as observe
from clusters.api_versions import FeaturesUnavailable
from clusters.jmx import JmxUnavailable
from clusters.topology import build_topology
from workloads.observe import PROBE_TIMEOUT_S, SAMPLE_TIMEOUT_S, Observer


class ListRecorder:
    def __init__(self) -> None:
        self.ops: list[dict] = []

    def record(self, type_, f, value, process, node=None, error=None):
        self.ops.append({"type": type_, "f": f, "process": process, "node": node})

    def invoke(self, f, value, process, node=None):
        self.record("invoke", f, value, process, node)

    def ok(self, f, value, process, node=None):
        self.record("ok", f, value, process, node)
        self.ops[-1]["value"] = value


FEATURES = {
    "supported": {"metadata.version": [1, 21]},
    "finalized": {"metadata.version": 21},
    "epoch": 5,
    "mode": "kraft",
    "api_version": 4,
}


@pytest.fixture
def observer(monkeypatch):
    topo = build_topology("kraft-combined", cluster="adm-unit", subnet="10.213.80.0/24")
    obs = Observer(topo, ListRecorder())
    dead = {"n2"}
    asked: list[tuple[str, float]] = []

    def fake_sample(ip, roles, timeout):
        name = next(n.name for n in obs.nodes if n.ip == ip)
        asked.append((name, timeout))
        if name in dead:
            raise JmxUnavailable(f"{ip}: ReadTimeout")
        return {"roles": sorted(roles)}

    monkeypatch.setattr(observe, "sample_kafka", fake_sample)
    monkeypatch.setattr(observe, "describe_features", lambda ip, port, timeout: dict(FEATURES))
    return obs, asked


def test_a_silent_node_is_probed_last_with_a_short_timeout(observer):
    obs, asked = observer
    obs.run_round(time.monotonic() + 0.2)
    assert [n for n, _ in asked] == ["n1", "n2", "n3"]
    asked.clear()
    obs.run_round(time.monotonic() + 0.2)
    assert [n for n, _ in asked] == ["n1", "n3", "n2"]
    assert asked[-1][1] == PROBE_TIMEOUT_S
    # Live nodes leave a probe's time for every node after them.
    assert all(PROBE_TIMEOUT_S <= t <= SAMPLE_TIMEOUT_S for _, t in asked)
    assert asked[0][1] <= 0.2 - 2 * PROBE_TIMEOUT_S + 1e-9


def test_samples_never_overlap_and_outcomes_are_recorded(observer):
    obs, _ = observer
    for _ in range(3):
        obs.run_round(time.monotonic() + 0.2)
    ops = obs.recorder.ops
    assert {op["process"] for op in ops} == {"observer"}
    # One process, one op in flight: invocations and completions alternate.
    assert [op["type"] == "invoke" for op in ops] == [i % 2 == 0 for i in range(len(ops))]
    n2 = [op["type"] for op in ops if op["node"] == "n2" and op["type"] != "invoke"]
    assert n2 == ["info"] * 3 and obs.samples == 6


def test_a_node_that_answers_again_is_no_longer_silent(observer, monkeypatch):
    obs, _ = observer
    obs.run_round(time.monotonic() + 0.2)
    assert obs.silent == {"n2"}
    monkeypatch.setattr(observe, "sample_kafka", lambda ip, roles, timeout: {})
    obs.run_round(time.monotonic() + 0.2)
    assert obs.silent == set()


def features_asked(monkeypatch, obs, fail: set[str]) -> list[tuple[str, int, float]]:
    """Replaces describe_features: records (node, port, timeout); nodes in `fail` time out."""
    asked: list[tuple[str, int, float]] = []

    def fake(ip, port, timeout):
        name = next(n.name for n in obs.nodes if n.ip == ip)
        asked.append((name, port, timeout))
        if name in fail:
            raise FeaturesUnavailable(f"{ip}:{port}: timed out after {timeout:.3f} s")
        return dict(FEATURES)

    monkeypatch.setattr(observe, "describe_features", fake)
    return asked


def test_an_answering_node_s_sample_carries_its_features(observer):
    obs, _ = observer
    obs.run_round(time.monotonic() + 0.2)
    n1 = next(op for op in obs.recorder.ops if op["node"] == "n1" and op["type"] == "ok")
    assert n1["value"] == {
        "roles": ["broker", "controller"],
        "features": FEATURES,
        "features_error": None,
    }


def test_features_that_do_not_answer_leave_the_sample_ok(observer, monkeypatch):
    obs, _ = observer
    asked = features_asked(monkeypatch, obs, fail={"n3"})
    obs.run_round(time.monotonic() + 0.2)
    n3 = [op for op in obs.recorder.ops if op["node"] == "n3" and op["type"] != "invoke"]
    assert [op["type"] for op in n3] == ["ok"]
    assert n3[0]["value"]["features"] is None
    assert "timed out" in n3[0]["value"]["features_error"]
    assert "n3" not in obs.silent and obs.features_silent == {"n3"}
    # The JMX-silent node is not asked for features at all.
    assert [n for n, _, _ in asked] == ["n1", "n3"]


def test_features_share_the_sample_s_timeout_and_a_silent_listener_gets_a_probe(
    observer, monkeypatch
):
    obs, jmx_asked = observer
    asked = features_asked(monkeypatch, obs, fail={"n3"})
    obs.run_round(time.monotonic() + 0.2)
    jmx_timeout = dict(jmx_asked)
    assert all(t <= jmx_timeout[n] for n, _, t in asked)
    asked.clear()
    obs.run_round(time.monotonic() + 0.2)
    assert dict((n, t) for n, _, t in asked)["n3"] <= PROBE_TIMEOUT_S
    assert dict((n, t) for n, _, t in asked)["n1"] > PROBE_TIMEOUT_S


def test_a_node_whose_features_answer_again_is_no_longer_features_silent(observer, monkeypatch):
    obs, _ = observer
    features_asked(monkeypatch, obs, fail={"n3"})
    obs.run_round(time.monotonic() + 0.2)
    features_asked(monkeypatch, obs, fail=set())
    obs.run_round(time.monotonic() + 0.2)
    assert obs.features_silent == set()


def test_brokers_are_asked_on_the_broker_port_and_controllers_on_the_controller_port(
    monkeypatch,
):
    topo = build_topology("kraft", cluster="adm-unit", subnet="10.213.80.0/24", brokers=1)
    obs = Observer(topo, ListRecorder())
    monkeypatch.setattr(observe, "sample_kafka", lambda ip, roles, timeout: {})
    asked = features_asked(monkeypatch, obs, fail=set())
    obs.run_round(time.monotonic() + 0.2)
    assert {(n, port) for n, port, _ in asked} == {
        ("c1", 9093),
        ("c2", 9093),
        ("c3", 9093),
        ("b1", 9092),
    }


def test_no_time_left_after_jmx_is_a_features_error_not_a_call(observer, monkeypatch):
    obs, _ = observer
    asked = features_asked(monkeypatch, obs, fail=set())

    def slow_sample(ip, roles, timeout):
        time.sleep(timeout)
        return {}

    monkeypatch.setattr(observe, "sample_kafka", slow_sample)
    assert obs.sample(obs.nodes[0], timeout=0.01)
    assert asked == []
    assert "no time left" in obs.recorder.ops[-1]["value"]["features_error"]


# DescribeTopicPartitions (KIP-966's ELR) from each broker -------------------------------------
def partitions_asked(monkeypatch, fail: set[str]) -> list[str]:
    asked: list[str] = []

    def fake(ip, port, timeout):
        asked.append(ip)
        if ip in fail:
            from clusters.topic_partitions import PartitionsUnavailable

            raise PartitionsUnavailable(f"{ip}:{port}: timed out")
        return [{"topic": "t", "partition": 0, "leader": 1, "isr": [1], "elr": [2]}]

    monkeypatch.setattr(observe, "describe_partitions", fake)
    return asked


def test_brokers_from_3_8_carry_their_partitions_at_most_once_a_second(monkeypatch):
    topo = build_topology("kraft", cluster="adm-unit", subnet="10.213.80.0/24", brokers=2)
    obs = Observer(topo, ListRecorder())
    version = {"10.213.80.14": "3.8.1", "10.213.80.15": "3.7.2"}
    monkeypatch.setattr(
        observe, "sample_kafka", lambda ip, roles, timeout: {"version": version.get(ip, "4.1.2")}
    )
    monkeypatch.setattr(observe, "describe_features", lambda ip, port, timeout: dict(FEATURES))
    asked = partitions_asked(monkeypatch, fail=set())
    obs.run_round(time.monotonic() + 0.5)
    obs.run_round(time.monotonic() + 0.5)
    # b1 (3.8.1) once in two rounds; b2 (3.7.2) never; controllers never.
    assert asked == ["10.213.80.14"]
    ok = [op for op in obs.recorder.ops if op["type"] == "ok"]
    with_partitions = [op["node"] for op in ok if "partitions" in op["value"]]
    assert with_partitions == ["b1"]
    assert ok[3]["value"]["partitions"][0]["elr"] == [2]


def test_partitions_that_do_not_answer_leave_the_sample_ok(monkeypatch):
    topo = build_topology("kraft-combined", cluster="adm-unit", subnet="10.213.80.0/24")
    obs = Observer(topo, ListRecorder())
    monkeypatch.setattr(observe, "sample_kafka", lambda ip, roles, timeout: {"version": "4.1.2"})
    monkeypatch.setattr(observe, "describe_features", lambda ip, port, timeout: dict(FEATURES))
    partitions_asked(monkeypatch, fail={"10.213.80.12"})
    obs.run_round(time.monotonic() + 0.5)
    by_node = {op["node"]: op for op in obs.recorder.ops if op["type"] == "ok"}
    assert set(by_node) == {"n1", "n2", "n3"}
    assert "timed out" in by_node["n2"]["value"]["partitions_error"]
    assert "partitions" in by_node["n1"]["value"]
