"""The Spark path must find exactly what the per-key reference path finds."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.families.queue.check import check_queue
from checkers.families.queue.context import queue_context
from checkers.families.queue.source import ElementSource
from checkers.families.queue.spark import SparkEngine
from checkers.families.queue.vector import LocalEngine
from tests.unit.checkers.histories import mixed_anomalies
from tests.unit.checkers.model import CONCURRENCY, INJECTIONS, KEYS, action_lists, run_model


def as_dicts(result):
    return [f.to_dict() for f in result.findings], result.edges.sorted_rows()


def test_spark_and_pandas_agree_on_a_history_with_every_kind(tmp_path, spark):
    h = mixed_anomalies()
    path = h.write(tmp_path)
    local = check_queue(path, reference=True)
    distributed = check_queue(path, spark=spark)
    assert {f.kind for f in local.findings} >= {
        "G1a", "poll-skip", "int-nonmonotonic-poll", "precommitted-read", "unseen",
    }  # fmt: skip
    assert as_dicts(distributed) == as_dicts(local)
    assert distributed.subscribe == local.subscribe


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(acts=action_lists, bug=st.sampled_from(sorted(INJECTIONS)), key=st.sampled_from(KEYS))
def test_spark_and_pandas_agree_on_generated_histories(tmp_path_factory, spark, acts, bug, key):
    m = run_model(acts, final_poll=False)
    INJECTIONS[bug](m, key)
    m.final_poll()
    path = m.h.write(tmp_path_factory.mktemp("gen"))
    spark_result = check_queue(path, spark=spark, slots=CONCURRENCY)
    assert as_dicts(spark_result) == as_dicts(check_queue(path, reference=True, slots=CONCURRENCY))


def test_spark_finds_a_fenced_producer_read_as_the_reference_does(tmp_path, spark):
    m = run_model([], final_poll=False)
    INJECTIONS["fenced-producer-read"](m, 1)
    m.final_poll()
    path = m.h.write(tmp_path)
    local = check_queue(path, reference=True, slots=CONCURRENCY)
    assert [f.kind for f in local.findings] == ["fenced-producer-read"]
    assert as_dicts(check_queue(path, spark=spark, slots=CONCURRENCY)) == as_dicts(local)


def test_spark_finds_a_read_from_another_partition_as_the_reference_does(tmp_path, spark):
    m = run_model([("send", 0, 2, "ok")], final_poll=False)
    INJECTIONS["read-from-other-partition"](m, 1)
    m.final_poll()
    path = m.h.write(tmp_path)
    local = check_queue(path, reference=True)
    assert [f.kind for f in local.findings] == ["read-from-other-partition"]
    assert as_dicts(check_queue(path, spark=spark)) == as_dicts(local)
    engine = SparkEngine(ElementSource(parquet=path, spark=spark))
    values = list(range(1000, m.next_value + 1))
    got = sorted((k, e.index, e.seq, e.value) for k, e in engine.sends_among(values))
    want = LocalEngine(ElementSource(parquet=path)).sends_among(values)
    assert got == sorted((k, e.index, e.seq, e.value) for k, e in want)


def test_spark_engines_facts_give_the_local_engines_context(tmp_path, spark):
    m = run_model(
        [("send", 0, 1, "info-happened"), ("txn", 1, [0, 2], "info-commit"), ("send", 0, 2, "ok")]
    )
    path = m.h.write(tmp_path)
    resets = [("2", 1, "assign", [0])]
    local = queue_context(LocalEngine(ElementSource(parquet=path)), resets, CONCURRENCY)
    assert local.committed_info
    spark_engine = SparkEngine(ElementSource(parquet=path, spark=spark))
    assert queue_context(spark_engine, resets, CONCURRENCY) == local


def _in_small_row_groups(path, tmp_path):
    """The same history with row groups of 7 rows: op and element rows share row groups, and a
    key's elements are spread over many of them."""
    import pyarrow.parquet as pq

    out = tmp_path / "small-groups.parquet"
    pq.write_table(pq.read_table(path), out, row_group_size=7)
    return out


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(acts=action_lists, bug=st.sampled_from(sorted(INJECTIONS)), key=st.sampled_from(KEYS))
def test_blobs_of_many_row_groups_buckets_and_edge_parts_agree_with_the_reference(
    tmp_path_factory, spark, acts, bug, key
):
    import checkers.families.queue.spark as engine

    m = run_model(acts, final_poll=False)
    INJECTIONS[bug](m, key)
    m.final_poll()
    tmp = tmp_path_factory.mktemp("gen")
    path = _in_small_row_groups(m.h.write(tmp), tmp)
    saved = engine.BUCKET_ELEMENTS, engine.EDGES_PER_BLOB
    engine.BUCKET_ELEMENTS, engine.EDGES_PER_BLOB = 3, 2
    try:
        got = check_queue(path, spark=spark, slots=CONCURRENCY)
    finally:
        engine.BUCKET_ELEMENTS, engine.EDGES_PER_BLOB = saved
    assert as_dicts(got) == as_dicts(check_queue(path, reference=True, slots=CONCURRENCY))


def test_a_history_pyarrow_cannot_open_goes_the_row_way_with_the_same_result(
    tmp_path, spark, monkeypatch
):
    import checkers.families.queue.spark as engine

    path = mixed_anomalies().write(tmp_path)
    blobs = check_queue(path, spark=spark)
    monkeypatch.setattr(engine, "_pyarrow_file", lambda uri: None)
    rows = check_queue(path, spark=spark)
    assert as_dicts(rows) == as_dicts(blobs)
    assert rows.findings


def test_keys_spread_over_every_bucket():
    import numpy as np

    from checkers.families.queue.spark import bucket_of

    for buckets in (2, 7, 14, 64):
        counts = np.bincount(bucket_of(np.arange(64 * buckets), buckets), minlength=buckets)
        assert counts.min() >= 0.5 * counts.mean(), (buckets, counts)
