"""The ApiVersions client, against response bytes built here by hand from the message schemas
(ApiVersionsResponse.json), and against a one-connection fake broker on localhost."""

from __future__ import annotations

import socket
import struct
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusters.api_versions import (
    FeaturesUnavailable,
    Reader,
    Unsupported,
    decode_response,
    describe_features,
    encode_compact_string,
    encode_request,
    encode_uvarint,
)

# --- hand-built encodings, independent of the module's own encoders ------------------------------


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def cstr(s: str) -> bytes:
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def tagged(fields: dict[int, bytes]) -> bytes:
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


NO_TAGS = uvarint(0)


def v3_body(
    api_keys=((0, 0, 11), (18, 0, 4)),
    supported=(("metadata.version", 1, 21), ("kraft.version", 0, 1)),
    epoch: int | None = 137,
    finalized=(("metadata.version", 21),),
    error: int = 0,
    extra_tags: dict[int, bytes] | None = None,
) -> bytes:
    body = struct.pack(">h", error) + uvarint(len(api_keys) + 1)
    for key, lo, hi in api_keys:
        body += struct.pack(">hhh", key, lo, hi) + NO_TAGS
    body += struct.pack(">i", 0)  # throttle
    tags: dict[int, bytes] = dict(extra_tags or {})
    if supported is not None:
        tags[0] = uvarint(len(supported) + 1) + b"".join(
            cstr(n) + struct.pack(">hh", lo, hi) + NO_TAGS for n, lo, hi in supported
        )
    if epoch is not None:
        tags[1] = struct.pack(">q", epoch)
    if finalized is not None:
        tags[2] = uvarint(len(finalized) + 1) + b"".join(
            cstr(n) + struct.pack(">hh", level, level) + NO_TAGS for n, level in finalized
        )
    return body + tagged(tags)


def response(correlation_id: int, body: bytes) -> bytes:
    """Header v0 (correlation id only) then the body: what follows the size prefix."""
    return struct.pack(">i", correlation_id) + body


def v0_unsupported(lo: int = 0, hi: int = 3) -> bytes:
    keys = [(0, 0, 11), (18, lo, hi)]
    return struct.pack(">hi", 35, len(keys)) + b"".join(struct.pack(">hhh", *k) for k in keys)


# --- codec ---------------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_uvarint_round_trips(n):
    raw = encode_uvarint(n)
    assert raw == uvarint(n)
    r = Reader(raw)
    assert r.uvarint() == n and r.done()


@given(st.one_of(st.none(), st.text()))
def test_compact_string_round_trips(s):
    r = Reader(encode_compact_string(s) + b"\x07")
    assert r.compact_string() == s
    assert r.int8() == 7 and r.done()


def test_a_varint_that_never_ends_is_a_bad_frame():
    with pytest.raises(FeaturesUnavailable, match="varint"):
        Reader(b"\xff" * 11).uvarint()


def test_the_request_is_header_v2_and_a_flexible_body():
    frame = encode_request(7, 4)
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    r = Reader(frame[4:])
    assert (r.int16(), r.int16(), r.int32()) == (18, 4, 7)
    client_id_len = r.int16()  # the header's client id keeps its int16 length (not compact)
    assert r.take(client_id_len) == b"kchaos-observer"
    assert r.tagged_fields() == {}
    assert r.compact_string() == "kchaos"
    assert r.compact_string() == "0.1.0"
    assert r.tagged_fields() == {} and r.done()


# --- decoding ------------------------------------------------------------------------------------


def test_a_kraft_answer_gives_features_epoch_and_mode():
    got = decode_response(response(3, v3_body()), 3, 4)
    assert got == {
        "supported": {"metadata.version": [1, 21], "kraft.version": [0, 1]},
        "finalized": {"metadata.version": 21},
        "epoch": 137,
        "mode": "kraft",
        "api_version": 4,
    }


def test_a_node_listing_zookeeper_only_apis_is_in_zk_mode():
    body = v3_body(api_keys=((4, 0, 7), (18, 0, 3)), supported=(), finalized=(), epoch=0)
    got = decode_response(response(1, body), 1, 3)
    assert got["mode"] == "zk" and got["epoch"] == 0
    assert got["supported"] == {} and got["finalized"] == {}


def test_absent_tags_mean_no_features_and_epoch_minus_one():
    got = decode_response(response(1, v3_body(supported=None, epoch=None, finalized=None)), 1, 3)
    assert (got["supported"], got["finalized"], got["epoch"]) == ({}, {}, -1)


def test_unknown_tags_are_skipped():
    body = v3_body(extra_tags={3: b"\x01", 9: b"future"})
    assert decode_response(response(1, body), 1, 4)["finalized"] == {"metadata.version": 21}


def test_an_error_code_is_unavailable():
    with pytest.raises(FeaturesUnavailable, match="error code 42"):
        decode_response(response(1, v3_body(error=42)), 1, 4)


def test_unsupported_version_is_read_as_v0_and_says_what_the_node_speaks():
    assert decode_response(response(1, v0_unsupported(0, 3)), 1, 4) == Unsupported(0, 3)


def test_unsupported_version_without_apiversions_in_it_is_unavailable():
    body = struct.pack(">hi", 35, 1) + struct.pack(">hhh", 0, 0, 11)
    with pytest.raises(FeaturesUnavailable, match="UNSUPPORTED_VERSION"):
        decode_response(response(1, body), 1, 4)


def test_another_requests_answer_is_a_bad_frame():
    with pytest.raises(FeaturesUnavailable, match="correlation id 2"):
        decode_response(response(2, v3_body()), 1, 4)


def test_bytes_after_the_body_are_a_bad_frame():
    with pytest.raises(FeaturesUnavailable, match="after the body"):
        decode_response(response(1, v3_body() + b"\x00"), 1, 4)


@pytest.mark.parametrize("cut", [0, 3, 5, 9, 20, 40, -9, -1])
def test_every_truncated_frame_is_unavailable(cut):
    frame = response(1, v3_body())
    with pytest.raises(FeaturesUnavailable, match="truncated"):
        decode_response(frame[:cut], 1, 4)


# --- the call, against a fake broker -------------------------------------------------------------


class FakeBroker:
    """Serves one connection: for each request read, sends the next of `answers` (whole frames,
    size prefix included, or raw bytes) or, for a float, sleeps that long; then closes the
    connection if `close`, else holds it open until the client hangs up."""

    def __init__(self, answers: list, close: bool = False) -> None:
        self.close_after = close
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.answers = answers
        self.requests: list[tuple[int, int, int]] = []  # (api key, version, correlation id)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            for answer in self.answers:
                prefix = conn.recv(4, socket.MSG_WAITALL)
                if len(prefix) < 4:
                    return
                request = conn.recv(struct.unpack(">i", prefix)[0], socket.MSG_WAITALL)
                self.requests.append(struct.unpack(">hhi", request[:8]))
                if isinstance(answer, threading.Event):
                    answer.wait(30)  # silent until the test lets it go
                else:
                    conn.sendall(answer)
            if not self.close_after:
                conn.settimeout(2)
                conn.recv(1)  # until the client hangs up

    def close(self) -> None:
        self.thread.join(timeout=2)
        self.sock.close()


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_describe_features_asks_v4():
    broker = FakeBroker([framed(response(1, v3_body()))])
    got = describe_features("127.0.0.1", broker.port, 1.0)
    broker.close()
    assert broker.requests == [(18, 4, 1)]
    assert got["api_version"] == 4 and got["epoch"] == 137


def test_a_node_without_v4_is_asked_again_at_v3_on_the_same_connection():
    broker = FakeBroker([framed(response(1, v0_unsupported(0, 3))), framed(response(2, v3_body()))])
    got = describe_features("127.0.0.1", broker.port, 1.0)
    broker.close()
    assert broker.requests == [(18, 4, 1), (18, 3, 2)]
    assert got["api_version"] == 3 and got["finalized"] == {"metadata.version": 21}


def test_a_node_without_v3_is_unavailable():
    broker = FakeBroker([framed(response(1, v0_unsupported(0, 2)))])
    with pytest.raises(FeaturesUnavailable, match="v0-v2"):
        describe_features("127.0.0.1", broker.port, 1.0)
    broker.close()


def test_a_frame_cut_by_a_closed_connection_is_unavailable():
    whole = framed(response(1, v3_body()))
    broker = FakeBroker([whole[:-5]], close=True)
    with pytest.raises(FeaturesUnavailable, match="connection closed"):
        describe_features("127.0.0.1", broker.port, 1.0)
    broker.close()


def test_an_absurd_size_is_a_bad_frame():
    broker = FakeBroker([struct.pack(">i", 1 << 30)])
    with pytest.raises(FeaturesUnavailable, match="size"):
        describe_features("127.0.0.1", broker.port, 1.0)
    broker.close()


def test_a_silent_node_costs_the_timeout_and_no_more():
    silent = threading.Event()
    broker = FakeBroker([silent])
    with pytest.raises(FeaturesUnavailable, match="timed out"):
        describe_features("127.0.0.1", broker.port, 0.1)
    # The client gave up on its own timeout: the node had neither answered nor hung up.
    assert not silent.is_set() and broker.thread.is_alive()
    silent.set()
    broker.close()


def test_a_refused_connection_is_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FeaturesUnavailable, match="Refused"):
        describe_features("127.0.0.1", port, 0.5)
