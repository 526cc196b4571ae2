"""The queue client's aborted transactions on a real cluster: what their polls read is recorded,
and the consumer goes back to where it stood when the transaction began (history.format.REWIND),
so the next poll continues where the last committed one ended."""

from __future__ import annotations

import random
from typing import Any

import pytest

from checkers.api import check
from harness.plan import generator_params
from harness.run.recorder import Recorder
from harness.spec import RunSpec
from history.format import JSONL_NAME
from workloads.client import Completion, Invocation
from workloads.queue import QueueClient, QueueWorkload

from .conftest import bring_up


@pytest.fixture(scope="module")
def cluster(docker_client, tmp_path_factory):
    yield from bring_up(
        docker_client, "kchaos-it-abort", "kraft-combined", "10.213.7.0/24", tmp_path_factory,
        heap_mb=256,
    )  # fmt: skip


class _Undelivered:
    """The producer as it is, except that flush says a send is still queued: the client's
    own "sends not delivered in time" abort (the path of the false poll-skip in issue 10),
    taken on purpose. The transaction, the abort and the seek all happen on the cluster."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer

    def flush(self, *args: Any) -> int:
        self._producer.flush(*args)
        return 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)


def _offsets(value: list[list[Any]]) -> list[int]:
    return [o for mop in value if mop[0] == "poll" for o, _ in mop[1].get("0", [])]


def test_an_aborted_transaction_records_its_polls_and_rewinds_the_consumer(cluster, tmp_path):
    _, info = cluster
    rec = Recorder(tmp_path / JSONL_NAME, "abort-test", header=QueueWorkload.HISTORY_HEADER)

    def apply(client: QueueClient, op: Invocation) -> Completion:
        """As the interpreter does: the invocation and its completion go into the history."""
        rec.invoke(op.f, op.value, client.process)
        done = client.apply(op)
        rec.record(done.type, op.f, done.value, client.process, error=done.error)
        return done

    spec = RunSpec.of(keys=1, txn=True, mode="assign", concurrency=1)
    gen = {**generator_params(spec), "poll_max_messages": 3, "poll_timeout_ms": 2000}
    wl = QueueWorkload(gen, info.topology, seed=1, run_id="abort-test")
    wl.setup()
    writer = QueueClient(wl, 0, random.Random(0))
    sends = [["send", 0, v] for v in range(1, 10)]
    wrote = apply(writer, Invocation("txn", sends))
    assert wrote.type == "ok", wrote
    writer.close()

    reader = QueueClient(wl, 1, random.Random(1))
    assert reader.open(reader.setup_op).type == "ok"
    first = apply(reader, Invocation("poll", [["poll"]]))
    assert first.type == "ok"
    ended = max(_offsets(first.value))

    real = reader.producer
    reader.producer = _Undelivered(real)
    aborted = apply(reader, Invocation("txn", [["poll"], ["send", 0, 100]]))
    reader.producer = real
    assert aborted.type == "fail" and aborted.error.startswith("aborted"), aborted
    assert not aborted.retire
    # The poll inside the aborted transaction happened, and the history says what it read.
    read_in_abort = _offsets(aborted.value)
    assert read_in_abort and min(read_in_abort) > ended
    assert aborted.value[1] == ["send", 0, 100]  # the send as invoked: it never committed

    after = apply(reader, Invocation("poll", [["poll"]]))
    assert after.type == "ok"
    # Rewound: the next poll starts right after the last committed poll, re-reading what the
    # aborted transaction had read.
    assert _offsets(after.value)[: len(read_in_abort)] == read_in_abort
    read = _offsets(after.value)
    for _ in range(20):  # on to the end of the partition, so that every send was read
        if max(read) >= 8:
            break
        read = _offsets(apply(reader, Invocation("poll", [["poll"]])).value) or read
    reader.close()
    wl.close()
    rec.close()
    # The checker reads the history as kchaos's client wrote it (rewind): valid.
    verdict = check(tmp_path, write=False)
    assert verdict.status == "valid", [f.explanation for f in verdict.failures]
