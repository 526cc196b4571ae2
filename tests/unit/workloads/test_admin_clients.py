"""The admin workload's clients: their configuration, describe-cluster's value, and what a broker
that knows no brokers yet does to them (docs/clients.md)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import BrokerMetadata, ClusterMetadata

from workloads.admin import REQUEST_TIMEOUT_S, admin_conf, cluster_view

ROOT = Path(__file__).resolve().parents[3]


def _fresh_zk_broker(*args: str) -> subprocess.CompletedProcess[str]:
    # A subprocess: an abort in librdkafka must not take pytest with it.
    return subprocess.run(
        [sys.executable, "-m", "tests.unit.workloads.fresh_zk_broker", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_connections_are_not_sparse_and_reconnects_back_off_within_a_request_timeout():
    conf = admin_conf("10.0.0.1")
    assert conf["bootstrap.servers"] == "10.0.0.1:9092"
    # Sparse connections let a request waiting for a refusing controller reconnect in a loop.
    assert conf["enable.sparse.connections"] is False
    assert conf["reconnect.backoff.max.ms"] <= REQUEST_TIMEOUT_S * 1000


def _metadata(controller: int, brokers: list[int], answered_by: int) -> ClusterMetadata:
    md = ClusterMetadata()
    md.cluster_id = "c-1"
    md.controller_id = controller
    md.orig_broker_id = answered_by
    for b in brokers:
        bm = BrokerMetadata()
        bm.id = b
        md.brokers[b] = bm
    return md


def test_describe_cluster_value_from_metadata():
    ids = {1: "b1", 2: "b2", 3: "b3"}
    assert cluster_view(_metadata(2, [3, 1, 2], 1), ids) == {
        "cluster_id": "c-1",
        "controller": 2,
        "controller_node": "b2",
        "brokers": [1, 2, 3],
        "answered_by": "b1",
    }
    # A broker that knows no controller says -1.
    view = cluster_view(_metadata(-1, [1], 3), ids)
    assert view["controller"] is None and view["controller_node"] is None
    assert view["answered_by"] == "b3"


def test_a_broker_that_lists_no_brokers_is_an_error_not_an_abort():
    done = _fresh_zk_broker()
    assert done.returncode == 0, done.stderr
    assert "before: {'cluster_id': 'fresh-zk-broker', 'controller': 1" in done.stdout
    assert "after: KafkaException" in done.stdout, done.stdout


def test_librdkafka_describe_cluster_still_aborts_on_that_answer():
    """What remains librdkafka's (docs/clients.md). When this fails, librdkafka no longer aborts:
    docs/clients.md should say from which release, and describe-cluster may use it again."""
    done = _fresh_zk_broker("--librdkafka")
    assert done.returncode == -signal.SIGABRT, (done.returncode, done.stdout, done.stderr)
    assert "rd_kafka_admin_response_parse: Assertion `rko_result' failed" in done.stderr
