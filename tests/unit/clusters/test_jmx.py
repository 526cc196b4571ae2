"""sample_kafka's reading of Jolokia's answers: the node's software version and JVM start."""

from __future__ import annotations

import clusters.jmx as jmx
from clusters.jmx import sample_kafka

# The two app-info MBeans a 3.9 node registers, as a Jolokia pattern read returns them.
APP_INFO = {
    "kafka.server:type=app-info,id=1": {"StartTimeMs": 1, "Version": "3.9.2", "CommitId": "x"},
    "kafka.server:type=app-info": {"start-time-ms": 1, "commit-id": "x", "version": "3.9.2"},
}


def fake_reads(monkeypatch, answers: dict) -> list[dict]:
    asked: list[dict] = []

    def read_many(self, reads):
        asked.append(reads)
        return {name: answers.get(name) for name in reads}

    monkeypatch.setattr(jmx.Jolokia, "read_many", read_many)
    return asked


def test_version_and_start_come_with_the_sample_in_one_request(monkeypatch):
    asked = fake_reads(monkeypatch, {"app_info": APP_INFO, "runtime": {"StartTime": 1795505851055}})
    got = sample_kafka("10.0.0.1", frozenset({"controller"}))
    assert len(asked) == 1
    assert got["version"] == "3.9.2" and got["started_ms"] == 1795505851055


def test_either_app_info_naming_gives_the_version(monkeypatch):
    for name, attrs in APP_INFO.items():
        fake_reads(monkeypatch, {"app_info": {name: attrs}})
        assert sample_kafka("10.0.0.1", frozenset({"broker"}))["version"] == "3.9.2"


def test_a_node_that_reports_neither_has_nulls(monkeypatch):
    fake_reads(monkeypatch, {})
    got = sample_kafka("10.0.0.1", frozenset({"broker"}))
    assert got["version"] is None and got["started_ms"] is None
