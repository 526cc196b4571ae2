"""What a Kafka node says about its features (KIP-584, KIP-778), asked with ApiVersions.

confluent-kafka has no DescribeFeatures, and DescribeFeatures goes to any broker, not the node we
want to hear from; ApiVersions is answered by every listener of every node (brokers, KRaft
controllers, ZooKeeper-mode brokers), each with its own supported ranges, finalized levels and
their epoch. The client is a few dozen lines over a plain socket: one connection per call,
bounded by one deadline.

Versions: v4 first, because below v4 a 3.9+ node leaves out every supported feature whose
minimum is 0 (KAFKA-17011, KAFKA-17492: kraft.version, group.version, transaction.version, ...),
and a checker would read that as "not supported". A node that knows only v0-v3 (3.8 and older)
answers v4 with UNSUPPORTED_VERSION in a v0 body listing the ApiVersions versions it has
(KIP-511); we then ask again at v3 on the same connection, as Kafka's own clients do. The answer
says which version it came from (`api_version`).

Wire format (clients/src/main/resources/common/message/ApiVersions{Request,Response}.json):
request header v2 (api key, api version, correlation id, int16-length nullable client id, tagged
fields), body: compact strings ClientSoftwareName and ClientSoftwareVersion, tagged fields.
The response header is always v0 (correlation id only), even for flexible versions, so that a
client that sent a version the node does not know can still read the answer.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
# The versions this client speaks: 3 is the first with features, 4 the first that lists them all.
MIN_VERSION = 3
MAX_VERSION = 4
# LeaderAndIsr, StopReplica, UpdateMetadata: only a ZooKeeper-mode broker serves them, so a node
# that lists one has ZooKeeper-mode features (epoch = the /feature znode's version), not KRaft's
# (epoch = the metadata log offset of the last feature record).
ZK_ONLY_API_KEYS = frozenset({4, 5, 6})
CLIENT_ID = "kchaos-observer"
# The broker checks both against [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? (KIP-511).
CLIENT_SOFTWARE_NAME = "kchaos"
CLIENT_SOFTWARE_VERSION = "0.1.0"
# Far above any real answer (a few kB); a larger size means we are not reading a Kafka frame.
MAX_FRAME = 1 << 20


class FeaturesUnavailable(Exception):
    """The node did not answer ApiVersions with its features (down, refused, slow, or garbled)."""


# --- codec -----------------------------------------------------------------------------------


def encode_uvarint(n: int) -> bytes:
    """Kafka's unsigned varint: 7 bits a byte, low bits first, high bit set on all but the last."""
    if n < 0:
        raise ValueError(f"unsigned varint of {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_compact_string(s: str | None) -> bytes:
    """A compact (nullable) string: length + 1 as an unsigned varint (0 = null), then UTF-8."""
    if s is None:
        return encode_uvarint(0)
    raw = s.encode()
    return encode_uvarint(len(raw) + 1) + raw


@dataclass
class Reader:
    """Reads Kafka's primitive types off a buffer; a read past its end is FeaturesUnavailable."""

    buf: bytes
    pos: int = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise FeaturesUnavailable(
                f"truncated frame: wanted {n} bytes at {self.pos} of {len(self.buf)}"
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            b = self.take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            # Kafka's varints are at most 5 bytes (int32) or 10 (int64).
            if shift > 63:
                raise FeaturesUnavailable("bad frame: varint longer than 10 bytes")

    def compact_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        try:
            return self.take(n - 1).decode()
        except UnicodeDecodeError:
            raise FeaturesUnavailable("bad frame: a string is not UTF-8") from None

    def compact_array_len(self) -> int:
        """The element count of a compact array; a null array reads as empty."""
        n = self.uvarint()
        return max(0, n - 1)

    def tagged_fields(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def done(self) -> bool:
        return self.pos == len(self.buf)


# --- request and response ----------------------------------------------------------------------


def encode_request(correlation_id: int, version: int = MAX_VERSION) -> bytes:
    """A whole ApiVersionsRequest frame (size prefix included) at a flexible version (3+)."""
    client_id = CLIENT_ID.encode()
    header = (
        struct.pack(">hhih", API_VERSIONS, version, correlation_id, len(client_id))
        + client_id
        + encode_uvarint(0)
    )
    body = (
        encode_compact_string(CLIENT_SOFTWARE_NAME)
        + encode_compact_string(CLIENT_SOFTWARE_VERSION)
        + encode_uvarint(0)
    )
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


@dataclass(frozen=True)
class Unsupported:
    """A v0 UNSUPPORTED_VERSION answer: the ApiVersions versions the node does speak."""

    min_version: int
    max_version: int


def decode_response(
    frame: bytes, correlation_id: int, version: int
) -> dict[str, Any] | Unsupported:
    """One response frame (without its size prefix), asked at `version` (3 or 4)."""
    r = Reader(frame)
    got_id = r.int32()
    if got_id != correlation_id:
        raise FeaturesUnavailable(f"bad frame: correlation id {got_id}, expected {correlation_id}")
    error = r.int16()
    if error == UNSUPPORTED_VERSION:
        return _decode_unsupported(r)
    if error != 0:
        raise FeaturesUnavailable(f"ApiVersions v{version} answered error code {error}")
    api_keys = _api_keys(r, r.compact_array_len())
    r.int32()  # throttle time
    tags = r.tagged_fields()
    if not r.done():
        raise FeaturesUnavailable(f"bad frame: {len(frame) - r.pos} bytes after the body")
    supported: dict[str, list[int]] = {}
    finalized: dict[str, int] = {}
    epoch = -1
    if 0 in tags:
        t = Reader(tags[0])
        for _ in range(t.compact_array_len()):
            name = t.compact_string()
            lo, hi = t.int16(), t.int16()
            t.tagged_fields()
            if name is not None:
                supported[name] = [lo, hi]
    if 1 in tags:
        epoch = Reader(tags[1]).int64()
    if 2 in tags:
        t = Reader(tags[2])
        for _ in range(t.compact_array_len()):
            name = t.compact_string()
            max_level = t.int16()
            t.int16()  # min version level: always equal to max since KIP-778 removed ranges
            t.tagged_fields()
            if name is not None:
                finalized[name] = max_level
    return {
        "supported": supported,
        "finalized": finalized,
        "epoch": epoch,
        "mode": "zk" if api_keys & ZK_ONLY_API_KEYS else "kraft",
        "api_version": version,
    }


def _api_keys(r: Reader, n: int) -> set[int]:
    """The api keys of `n` (key, min, max, tagged fields) entries. Every node sends each with no
    tagged field, 7 bytes: read as one block, which halved an observer sample's CPU (the ~70
    entries one field at a time were most of it); any tagged field, and the rest is read
    field by field."""
    block = r.buf[r.pos : r.pos + 7 * n]
    if len(block) == 7 * n and block[6::7] == bytes(n):
        r.pos += 7 * n
        return {key for key, _, _, _ in struct.iter_unpack(">hhhB", block)}
    keys: set[int] = set()
    for _ in range(n):
        keys.add(r.int16())
        r.int16()  # min version
        r.int16()  # max version
        r.tagged_fields()
    return keys


def _decode_unsupported(r: Reader) -> Unsupported:
    # v0 body: int32-counted array of (key, min, max), nothing after it.
    count = r.int32()
    if count < 0 or count > MAX_FRAME:
        raise FeaturesUnavailable(f"bad frame: UNSUPPORTED_VERSION with {count} api keys")
    for _ in range(count):
        key, lo, hi = r.int16(), r.int16(), r.int16()
        if key == API_VERSIONS:
            return Unsupported(lo, hi)
    raise FeaturesUnavailable("UNSUPPORTED_VERSION without the ApiVersions versions it speaks")


# --- the call ----------------------------------------------------------------------------------


def describe_features(host: str, port: int, timeout: float) -> dict[str, Any]:
    """Asks one node's listener for its features; the whole call ends within `timeout` seconds.

    Returns {"supported": {name: [min, max]}, "finalized": {name: max_level}, "epoch": int,
    "mode": "zk" | "kraft", "api_version": 3 | 4}. `finalized` leaves out features at level 0
    (Kafka never lists them) and `epoch` is -1 when the node knows no finalized features yet.
    """
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            answer = _round_trip(sock, 1, MAX_VERSION, deadline)
            if isinstance(answer, Unsupported) and answer.max_version >= MIN_VERSION:
                answer = _round_trip(sock, 2, min(answer.max_version, MAX_VERSION), deadline)
            if isinstance(answer, Unsupported):
                raise FeaturesUnavailable(
                    f"speaks ApiVersions v{answer.min_version}-v{answer.max_version}, "
                    f"features need v{MIN_VERSION}+"
                )
            return answer
    except FeaturesUnavailable as exc:
        raise FeaturesUnavailable(f"{host}:{port}: {exc}") from None
    except TimeoutError:
        raise FeaturesUnavailable(f"{host}:{port}: timed out after {timeout:.3f} s") from None
    except OSError as exc:
        raise FeaturesUnavailable(f"{host}:{port}: {type(exc).__name__}: {exc}") from None


def _round_trip(
    sock: socket.socket, correlation_id: int, version: int, deadline: float
) -> dict[str, Any] | Unsupported:
    frame = exchange(sock, encode_request(correlation_id, version), deadline, FeaturesUnavailable)
    return decode_response(frame, correlation_id, version)


def exchange(sock: socket.socket, request: bytes, deadline: float, error: type[Exception]) -> bytes:
    """Sends one request and reads its response frame whole by ``deadline`` (TimeoutError
    past it); a bad frame size or a closed connection is ``error``, each request's own."""
    _settimeout(sock, deadline)
    sock.sendall(request)
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4, deadline, error))
    if size < 4 or size > MAX_FRAME:
        raise error(f"bad frame: size {size}")
    return _recv_exactly(sock, size, deadline, error)


def _settimeout(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    sock.settimeout(left)


def _recv_exactly(sock: socket.socket, n: int, deadline: float, error: type[Exception]) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        _settimeout(sock, deadline)
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise error(f"connection closed after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)
