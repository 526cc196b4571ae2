"""The DescribeTopicPartitions client (KIP-966's ELR per partition), against response bytes built
here by hand from DescribeTopicPartitionsResponse.json, and against a one-connection fake broker
on localhost."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.topic_partitions import (
    DESCRIBE_TOPIC_PARTITIONS,
    PartitionsUnavailable,
    decode_response,
    describe_partitions,
    encode_request,
)
from tests.unit.clusters.test_api_versions import NO_TAGS, FakeBroker, cstr, framed, uvarint


def int32s(values: list[int] | None) -> bytes:
    """A compact (nullable) array of int32: length + 1, 0 for null."""
    if values is None:
        return uvarint(0)
    return uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


def partition(index, leader=1, epoch=3, replicas=(1, 2, 3), isr=(1, 2), elr=(3,), lke=()):
    return (
        struct.pack(">hiii", 0, index, leader, epoch)
        + int32s(list(replicas))
        + int32s(list(isr))
        + int32s(None if elr is None else list(elr))
        + int32s(None if lke is None else list(lke))
        + int32s([])  # offline replicas
        + NO_TAGS
    )


def topic(name, partitions, internal=False, error=0):
    return (
        struct.pack(">h", error)
        + cstr(name)
        + bytes(16)  # topic id
        + struct.pack(">b", 1 if internal else 0)
        + uvarint(len(partitions) + 1)
        + b"".join(partitions)
        + struct.pack(">i", -(2**31))  # authorized operations: not asked
        + NO_TAGS
    )


def response(correlation_id, topics, cursor=None):
    body = struct.pack(">i", 0) + uvarint(len(topics) + 1) + b"".join(topics)
    if cursor is None:
        body += struct.pack(">b", -1)
    else:
        body += struct.pack(">b", 1) + cstr(cursor[0]) + struct.pack(">i", cursor[1]) + NO_TAGS
    return struct.pack(">i", correlation_id) + NO_TAGS + body + NO_TAGS


def test_the_request_asks_every_topic_without_a_cursor():
    frame = encode_request(7)
    size, key, version, cid = struct.unpack(">ihhi", frame[:12])
    assert size == len(frame) - 4 and (key, version, cid) == (DESCRIBE_TOPIC_PARTITIONS, 0, 7)
    # ... client id, no tagged fields, then: no topics, the partition limit, a null cursor.
    assert frame.endswith(b"\x01" + struct.pack(">i", 2000) + b"\xff\x00")


def test_every_partition_of_every_topic_but_the_internal_ones():
    frame = response(
        1,
        [
            topic("__consumer_offsets", [partition(0)], internal=True),
            topic("kchaos-queue", [partition(0), partition(1, leader=-1, isr=(), elr=(2, 3))]),
        ],
    )
    got = decode_response(frame, 1)
    assert [(p["topic"], p["partition"], p["leader"], p["isr"], p["elr"]) for p in got] == [
        ("kchaos-queue", 0, 1, [1, 2], [3]),
        ("kchaos-queue", 1, -1, [], [2, 3]),
    ]
    assert got[0]["last_known_elr"] == [] and got[0]["replicas"] == [1, 2, 3]


def test_a_null_elr_stays_null_and_a_next_cursor_is_read_past():
    frame = response(1, [topic("t", [partition(0, elr=None, lke=None)])], cursor=("t", 1))
    (p,) = decode_response(frame, 1)
    assert p["elr"] is None and p["last_known_elr"] is None


def test_a_garbled_frame_is_unavailable_not_a_traceback():
    frame = response(1, [topic("t", [partition(0)])])
    with pytest.raises(PartitionsUnavailable, match="correlation id"):
        decode_response(frame, 2)
    with pytest.raises(PartitionsUnavailable, match="after the body"):
        decode_response(frame + b"\x00", 1)


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=200))
def test_any_cut_of_a_frame_is_unavailable(cut):
    frame = response(1, [topic("kchaos-queue", [partition(0), partition(1)])])
    if cut >= len(frame):
        return
    with pytest.raises(PartitionsUnavailable):
        decode_response(frame[:cut], 1)


def test_against_a_fake_broker():
    broker = FakeBroker([framed(response(1, [topic("t", [partition(2, elr=(1,))])]))])
    got = describe_partitions("127.0.0.1", broker.port, 1.0)
    broker.close()
    assert broker.requests == [(DESCRIBE_TOPIC_PARTITIONS, 0, 1)]
    assert got[0]["partition"] == 2 and got[0]["elr"] == [1]


def test_a_broker_that_hangs_up_is_unavailable():
    broker = FakeBroker([b""], close=True)
    with pytest.raises(PartitionsUnavailable, match="connection closed"):
        describe_partitions("127.0.0.1", broker.port, 1.0)
    broker.close()
