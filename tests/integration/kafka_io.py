"""Small Kafka client helpers for integration tests (the real workloads live in workloads/)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

T = TypeVar("T")


def wait_until(
    what: str,
    probe: Callable[[], T | None],
    timeout: float = 120,
    every: float = 0.25,
    explain: Callable[[], str] | None = None,
) -> T:
    """Polls ``probe`` until it returns something truthy; on timeout names ``what`` and adds what
    ``explain`` says (CI keeps no cluster to look at afterwards)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    why = f"\n{explain()}" if explain else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r}){why}")


# A create whose broker handle librdkafka replaced mid-request (a bootstrap handle retired once
# the cluster's own brokers are known: "_DESTROY_BROKER", lost a CI run) may or may not have
# happened: asked again, "already exists" is then our own first attempt.
_RETRIED = (KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError._TIMED_OUT)


def create_topic(bootstrap: str, topic: str, partitions: int = 3, replication: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for attempt in range(3):
        futures = admin.create_topics(
            [NewTopic(topic, partitions, replication, config={"min.insync.replicas": "2"})],
            operation_timeout=60,
        )
        try:
            for f in futures.values():
                f.result(timeout=90)
            return
        except KafkaException as exc:
            code = exc.args[0].code()
            if attempt and code == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if code not in _RETRIED or attempt == 2:
                raise


def produce(
    bootstrap: str, topic: str, values: list[str], timeout: float = 120
) -> list[tuple[int, int]]:
    """Produces with acks=all and idempotence; returns (partition, offset) of every ack."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": int(timeout * 1000),
            "log_level": 3,
        }
    )
    acked: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def on_delivery(err, msg):
        if err:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset()))

    for i, v in enumerate(values):
        producer.produce(topic, key=str(i), value=v, on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(timeout)
    assert remaining == 0 and not errors, f"{remaining} unacknowledged, errors {errors[:3]}"
    return acked


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 120) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kchaos-test-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    values.append(msg.value().decode())
    finally:
        consumer.close()
    return values
