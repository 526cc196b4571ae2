"""The admin workload's generator (seeded, deterministic) and the shapes of its operations."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException

from clusters.topology import build_topology
from harness.plan import build_plan, client_rng
from harness.spec import RunSpec, SpecError, validate
from workloads.admin import ADMIN_FS, AdminOpsClient, AdminWorkload, classify


def _client(seed: int, process: int) -> AdminOpsClient:
    plan = build_plan(validate(RunSpec.of(workload="admin")), seed)
    topo = build_topology("kraft-combined", cluster="adm-unit", subnet="10.213.81.0/24")
    wl = AdminWorkload(plan.generator, topo, seed, "admin/unit")
    return AdminOpsClient(wl, process, client_rng(seed, process))


def _ops(seed: int, process: int, n: int = 200) -> list[tuple[str, str, object]]:
    c = _client(seed, process)
    return [(op.f, op.node, op.value) for op in (c.next_op() for _ in range(n))]


def test_same_seed_same_operations_and_different_seeds_differ():
    assert _ops(7, 0) == _ops(7, 0)
    assert _ops(7, 0) != _ops(8, 0)
    assert _ops(7, 0) != _ops(7, 1)


def test_the_plan_is_byte_identical_for_the_same_seed():
    spec = validate(RunSpec.of(workload="admin"))
    assert build_plan(spec, 3).to_json() == build_plan(spec, 3).to_json()
    assert build_plan(spec, 3).generator["workload"] == "admin"


def test_op_shapes():
    ops = _ops(11, 2)
    assert {f for f, _, _ in ops} == set(ADMIN_FS)
    created: set[str] = set()
    for f, node, value in ops:
        assert node in {"n1", "n2", "n3"}
        json.dumps(value)  # plain data
        if f == "create-topic":
            assert set(value) == {"topic", "partitions", "replication"}
            assert value["topic"].startswith("adm-2-") and value["topic"] not in created
            created.add(value["topic"])
        elif f == "delete-topic":
            assert set(value) == {"topic"} and value["topic"] in created
        elif f == "alter-config":
            assert set(value) == {"topic", "config"} and value["topic"] in created
            ((name, setting),) = value["config"].items()
            assert name in {"retention.ms", "min.insync.replicas"} and isinstance(setting, str)
        else:
            assert value is None


def test_deleted_topics_are_not_deleted_or_altered_again():
    deleted: set[str] = set()
    for f, _, value in _ops(5, 0, 400):
        if f in ("delete-topic", "alter-config"):
            assert value["topic"] not in deleted
        if f == "delete-topic":
            deleted.add(value["topic"])
    assert deleted


def test_only_errors_that_prove_nothing_changed_are_fail():
    assert classify(KafkaException(KafkaError(KafkaError.INVALID_CONFIG))) == "fail"
    # Our own retried request may have created (or deleted) the topic: unknown.
    assert classify(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))) == "info"
    assert classify(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))) == "info"
    assert classify(KafkaException(KafkaError(KafkaError._TIMED_OUT))) == "info"
    # A retry's answer when fewer brokers are registered than at the first attempt, which may
    # have created the topic.
    assert classify(KafkaException(KafkaError(KafkaError.INVALID_REPLICATION_FACTOR))) == "info"


def test_an_unknown_workload_is_one_sentence():
    with pytest.raises(SpecError, match="unknown workload 'adm': valid workloads are queue, admin"):
        validate(RunSpec.of(workload="adm"))
