"""Jolokia.read_many over http.client: the answer, and each failure named as the observer reads
it (``ConnectionError`` is a refused or broken connection, the timeouts are not)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from clusters.jmx import JmxUnavailable, Jolokia


@contextmanager
def jolokia_like(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class Answers(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(
            [
                {"status": 200, "value": {"Value": 3}}
                if r["mbean"].startswith("kafka.server")
                else {"status": 404, "error": "no such MBean"}
                for r in asked
            ]
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Fails(Answers):
    def do_POST(self) -> None:
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()


READS = {
    "state": ("kafka.server:type=KafkaServer,name=BrokerState", ["Value"]),
    "none": ("kafka.controller:type=Nothing", ["Value"]),
}


def _error(j: Jolokia) -> str:
    with pytest.raises(JmxUnavailable) as got:
        j.read_many(READS)
    return str(got.value)


def test_answers_and_missing_mbeans():
    with jolokia_like(Answers) as port:
        assert Jolokia("127.0.0.1", port).read_many(READS) == {"state": {"Value": 3}, "none": None}


def test_an_http_error_status():
    with jolokia_like(Fails) as port:
        assert _error(Jolokia("127.0.0.1", port)) == "127.0.0.1: HTTPError"


def test_a_refused_connection_is_a_connection_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    assert _error(Jolokia("127.0.0.1", port)) == "127.0.0.1: ConnectionError"


def test_a_listener_that_never_answers_is_a_read_timeout():
    s = socket.create_server(("127.0.0.1", 0))  # accepts (backlog), never reads
    try:
        j = Jolokia("127.0.0.1", s.getsockname()[1], timeout=0.2)
        assert _error(j) == "127.0.0.1: ReadTimeout"
    finally:
        s.close()


def test_a_listener_that_is_not_http_is_a_connection_error():
    s = socket.create_server(("127.0.0.1", 0))

    def close_at_once() -> None:
        conn, _ = s.accept()
        conn.recv(1024)
        conn.close()

    threading.Thread(target=close_at_once, daemon=True).start()
    try:
        assert _error(Jolokia("127.0.0.1", s.getsockname()[1])) == "127.0.0.1: ConnectionError"
    finally:
        s.close()
