"""The Java client's pure parts: how an exception becomes fail or info, its configurations, the
client choice's refusals. The JVM itself is exercised by tests/integration/test_run_java.py on a
real cluster; the protocol round trip without a cluster is checked here (a refused send)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusters.kafka_dist import load_dist
from workloads.client_choice import ClientChoiceError, check, client_params, history_header
from workloads.java_client import Events, consumer_conf, producer_conf, send_outcome
from workloads.java_host import JavaError, JavaGone, JavaHost, conf_args


class _Wl:
    def __init__(self, **gen) -> None:
        self.gen = {"txn": False, "poll_max_messages": 64, "mode": "assign", **gen}
        self.bootstrap = "10.0.0.1:9092"


@pytest.mark.parametrize(
    ("err", "pre", "outcome"),
    [
        ("TimeoutException: Topic t not present in metadata after 500 ms.", True, "fail"),
        ("TimeoutException: Expiring 1 record(s) for t-0: 10000 ms has passed", False, "info"),
        ("NotEnoughReplicasException: only 1 in sync", False, "info"),
        ("RecordTooLargeException: too large", False, "fail"),
        ("ProducerFencedException: fenced", False, "info"),
    ],
)
def test_a_send_fails_only_when_no_broker_can_have_appended_it(err, pre, outcome):
    assert send_outcome(JavaError(err, "retriable", pre)) == outcome


def test_a_gone_jvm_leaves_a_send_unknown():
    assert send_outcome(JavaGone("exited")) == "info"


def test_producer_bounds_a_send_as_librdkafka_does_and_keeps_its_timeouts_consistent():
    conf = producer_conf(_Wl(), None, pipelined=False)
    assert conf["acks"] == "all" and conf["enable.idempotence"] is True
    # KafkaProducer refuses delivery.timeout.ms below linger.ms + request.timeout.ms.
    assert conf["delivery.timeout.ms"] >= conf["linger.ms"] + conf["request.timeout.ms"]
    txn = producer_conf(_Wl(txn=True), "kchaos-r-slot0", pipelined=False)
    assert txn["transactional.id"] == "kchaos-r-slot0"
    assert txn["max.block.ms"] >= txn["transaction.timeout.ms"]
    piped = producer_conf(_Wl(linger_ms=5.0, batch_size=65536), None, pipelined=True)
    assert piped["linger.ms"] == 5 and piped["batch.size"] == 65536


def test_the_consumer_protocol_leaves_session_timing_to_the_coordinator():
    classic = consumer_conf(_Wl(mode="subscribe"), "g", subscribe=True)
    assert "group.protocol" not in classic and classic["session.timeout.ms"] == 6000
    kip848 = consumer_conf(_Wl(mode="subscribe", group_protocol="consumer"), "g", subscribe=True)
    assert kip848["group.protocol"] == "consumer"
    assert "session.timeout.ms" not in kip848 and "heartbeat.interval.ms" not in kip848
    assert consumer_conf(_Wl(txn=True), "g", False)["isolation.level"] == "read_committed"


def test_events_keep_the_runs_topic_on_the_historys_clock():
    times = iter([4000, 6000])
    ev = Events("kchaos-queue", lambda: next(times))
    ev({"ev": "assigned", "h": 3, "p": [["kchaos-queue", 2], ["other", 1], ["kchaos-queue", 0]]})
    ev({"ev": "revoked", "h": 3, "p": [["kchaos-queue", 2]]})
    assert ev.take() == [["assigned", [0, 2], 4000], ["revoked", [2], 6000]]
    assert ev.take() == []


def test_conf_args_refuse_what_would_break_the_line_protocol():
    assert conf_args({"a": True, "b": 5}) == ["a=true", "b=5"]
    with pytest.raises(ValueError):
        conf_args({"a": "x\ty"})


class _Opts:
    def __init__(self, **kw) -> None:
        self.version = kw.pop("version", "4.4")
        for k, v in kw.items():
            setattr(self, k, v)


def test_the_default_client_adds_nothing_to_a_plan_or_header():
    assert client_params(_Opts()) == {}
    assert client_params(_Opts(client="librdkafka", group_protocol="classic")) == {}
    java = client_params(_Opts(client="java"))
    assert java == {"client": "java", "client_version": "4.4"}
    assert history_header({**java, "keys": 8}) == {"client": "java"}


def _check(**kw):
    base = dict(
        client=None,
        client_version=None,
        group_protocol=None,
        txn_protocol=None,
        workload="queue",
        mode="assign",
        txn=False,
        topology="kraft-combined",
        releases=["4.4"],
    )
    check(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"txn_protocol": "v2", "txn": True}, "librdkafka does not implement"),
        ({"txn_protocol": "v2", "client": "java"}, "add --txn"),
        ({"txn_protocol": "classic", "txn": True, "releases": ["3.9"]}, "4.0 or later"),
        ({"txn_protocol": "classic", "txn": True, "topology": "zk"}, "KRaft topology"),
        ({"group_protocol": "consumer"}, "--mode subscribe"),
        ({"group_protocol": "consumer", "mode": "subscribe", "releases": ["3.9", "4.0"]}, "3.9"),
        ({"client": "java", "workload": "admin"}, "queue workload"),
        ({"client_version": "4.1"}, "--client java"),
    ],
)
def test_client_options_that_cannot_run_are_refused_with_the_reason(kw, says):
    with pytest.raises(ClientChoiceError, match=says):
        _check(**kw)


def test_client_options_that_can_run_pass():
    _check(client="java", txn=True, txn_protocol="v2")
    _check(client="java", mode="subscribe", group_protocol="consumer", client_version="4.1")
    _check(txn=True, txn_protocol="classic")


def _cached_dist():
    for version in ("4.4.0", "4.1.2", "3.9.2", "3.9.1", "3.8.1"):
        dist = load_dist(version)
        if dist is not None:
            return dist
    return None


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_the_jvm_answers_and_a_send_refused_before_queueing_is_definite(tmp_path: Path):
    dist = _cached_dist()
    if dist is None:
        pytest.skip("no Kafka release assembled (make setup assembles one)")
    host = JavaHost(dist)
    try:
        p = host.handle()
        conf = {"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 300}
        assert host.call("producer", p, *conf_args(conf), timeout=30) is True
        with pytest.raises(JavaError) as refused:
            host.call("send", p, "t", 0, "0", 1, timeout=30)
        assert refused.value.pre and send_outcome(refused.value) == "fail"
        assert "TimeoutException" in refused.value.message
        assert host.call("close", p, 0, timeout=30) is True
    finally:
        host.close()
    with pytest.raises(JavaGone):
        host.call("producer", host.handle(), timeout=5)
