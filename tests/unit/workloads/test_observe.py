"""The observer's round: one op in flight, live nodes first, a silent node only probed briefly."""

from __future__ import annotations

import time

import pytest

import workloads.observe as observe
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
