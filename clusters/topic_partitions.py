"""What one broker says about its partitions, ELR included (KIP-966), asked with
DescribeTopicPartitions.

KIP-966 adds the Eligible Leader Replicas and the last known ELR to every partition the
controller keeps, and "The ELR fields can be checked through the API DescribeTopicPartitions"
(Kafka's docs, Eligible Leader Replicas). Each broker answers it from its own metadata cache, so
asking every broker shows what each one believed, lag included. librdkafka has no such call;
like ApiVersions (clusters/api_versions.py, whose codec this reuses) it is a few dozen lines over
a plain socket: one connection per call, bounded by one deadline.

Wire format (clients/src/main/resources/common/message/DescribeTopicPartitions{Request,
Response}.json, api key 75, version 0 only, flexible): request header v2 (api key, version,
correlation id, int16-length client id, tagged fields); body: Topics (compact array; empty asks
for every topic), ResponsePartitionLimit (int32), Cursor (nullable struct: -1 for none), tagged
fields. Response header v1 (correlation id, tagged fields); body: ThrottleTimeMs, Topics (error,
name, topic id, is internal, partitions: error, index, leader, leader epoch, replicas, ISR,
EligibleLeaderReplicas (nullable), LastKnownElr (nullable), offline replicas, tagged fields;
authorized operations, tagged fields), NextCursor (nullable struct), tagged fields. The broker
listener only (`"listeners": ["broker"]`); Kafka 3.8 and later (KIP-966's first part).
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from clusters.api_versions import (
    CLIENT_ID,
    FeaturesUnavailable,
    Reader,
    encode_uvarint,
    exchange,
)

DESCRIBE_TOPIC_PARTITIONS = 75
VERSION = 0
# The first release that answers it (KIP-966's RPC, KAFKA-15585).
SINCE = (3, 8)
# Far above kchaos's partitions (a queue topic of up to a few dozen): one answer holds them all.
PARTITION_LIMIT = 2000


class PartitionsUnavailable(Exception):
    """The broker did not answer DescribeTopicPartitions (down, refused, slow, or garbled)."""


def encode_request(correlation_id: int) -> bytes:
    """A whole request frame (size prefix included) for every topic, no cursor."""
    client_id = CLIENT_ID.encode()
    header = (
        struct.pack(">hhih", DESCRIBE_TOPIC_PARTITIONS, VERSION, correlation_id, len(client_id))
        + client_id
        + encode_uvarint(0)
    )
    body = (
        encode_uvarint(1)  # Topics: a compact array of none (length + 1)
        + struct.pack(">i", PARTITION_LIMIT)
        + struct.pack(">b", -1)  # Cursor: null
        + encode_uvarint(0)
    )
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _int32_array(r: Reader, nullable: bool = False) -> list[int] | None:
    n = r.uvarint()
    if n == 0:
        if nullable:
            return None
        return []
    return [r.int32() for _ in range(n - 1)]


def decode_response(frame: bytes, correlation_id: int) -> list[dict[str, Any]]:
    """One response frame (without its size prefix): every partition of every topic that is not
    internal, as {topic, partition, error, leader, leader_epoch, replicas, isr, elr,
    last_known_elr, offline}; ``elr`` and ``last_known_elr`` are None when the broker sent
    null. Raises PartitionsUnavailable on a frame that does not read."""
    try:
        return _decode(frame, correlation_id)
    except FeaturesUnavailable as exc:
        raise PartitionsUnavailable(str(exc)) from None


def _decode(frame: bytes, correlation_id: int) -> list[dict[str, Any]]:
    r = Reader(frame)
    got = r.int32()
    if got != correlation_id:
        raise PartitionsUnavailable(f"bad frame: correlation id {got}, expected {correlation_id}")
    r.tagged_fields()
    r.int32()  # throttle time
    out = []
    for _ in range(r.compact_array_len()):
        topic_error = r.int16()
        name = r.compact_string()
        r.take(16)  # topic id
        internal = r.int8() != 0
        partitions = []
        for _ in range(r.compact_array_len()):
            error = r.int16()
            index = r.int32()
            leader = r.int32()
            epoch = r.int32()
            replicas = _int32_array(r)
            isr = _int32_array(r)
            elr = _int32_array(r, nullable=True)
            last_known = _int32_array(r, nullable=True)
            offline = _int32_array(r)
            r.tagged_fields()
            partitions.append(
                {
                    "topic": name,
                    "partition": index,
                    "error": error,
                    "leader": leader,
                    "leader_epoch": epoch,
                    "replicas": replicas,
                    "isr": isr,
                    "elr": elr,
                    "last_known_elr": last_known,
                    "offline": offline,
                }
            )
        r.int32()  # authorized operations
        r.tagged_fields()
        if internal:
            continue
        if topic_error != 0 and not partitions:
            out.append({"topic": name, "partition": None, "error": topic_error})
        out.extend(partitions)
    if r.int8() >= 0:  # NextCursor: a struct follows only when it is not null
        r.compact_string()
        r.int32()
        r.tagged_fields()
    r.tagged_fields()
    if not r.done():
        raise PartitionsUnavailable(f"bad frame: {len(frame) - r.pos} bytes after the body")
    return out


def describe_partitions(host: str, port: int, timeout: float) -> list[dict[str, Any]]:
    """Asks one broker for every partition of every topic that is not internal; the whole call
    ends within ``timeout`` seconds (decode_response says what each entry holds)."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            frame = exchange(sock, encode_request(1), deadline, PartitionsUnavailable)
            return decode_response(frame, 1)
    except PartitionsUnavailable as exc:
        raise PartitionsUnavailable(f"{host}:{port}: {exc}") from None
    except TimeoutError:
        raise PartitionsUnavailable(f"{host}:{port}: timed out after {timeout:.3f} s") from None
    except OSError as exc:
        raise PartitionsUnavailable(f"{host}:{port}: {type(exc).__name__}: {exc}") from None
