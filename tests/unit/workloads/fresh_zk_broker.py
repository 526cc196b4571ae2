"""A listener that answers Metadata the way a ZooKeeper-mode Kafka broker does before the
controller's first UpdateMetadata reaches it: with no brokers, no topics and no controller.

Kafka's ZooKeeper-mode broker opens its listener before its metadata cache is filled, so a
client connected right after a restart gets such an answer. This listener speaks just enough of
the protocol for librdkafka to connect (ApiVersions v3, Metadata v0-v2); until told otherwise it
answers Metadata like a one-broker cluster whose broker and controller is itself, so that a
client learns a controller first, as one that was connected before the restart has.

Run as a script, it is the reproduction docs/clients.md describes: ``--librdkafka`` asks
librdkafka's own DescribeCluster (the process aborts: rdkafka_admin.c, ``rko_result``),
without it the admin workload's describe-cluster is asked (it raises a KafkaException).
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading

from clusters.api_versions import encode_uvarint

API_VERSIONS = 18
METADATA = 3
# (api key, min version, max version) this listener speaks.
SPOKEN = ((METADATA, 0, 2), (API_VERSIONS, 0, 3))


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class FreshZkBroker:
    """Listens on 127.0.0.1 (an ephemeral port); ``empty`` set: Metadata lists nothing."""

    def __init__(self) -> None:
        self.node_id = 1
        self.empty = threading.Event()
        self.metadata_answers = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = _recv_exactly(conn, 4)
                if head is None:
                    return
                frame = _recv_exactly(conn, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                key, version, correlation = struct.unpack(">hhi", frame[:8])
                if key == API_VERSIONS:
                    body = self._api_versions(version)
                elif key == METADATA:
                    body = self._metadata(version)
                else:
                    return  # not spoken: the client sees the connection close
                # Metadata v0-v2 and every ApiVersions answer have response header v0.
                payload = struct.pack(">i", correlation) + body
                conn.sendall(struct.pack(">i", len(payload)) + payload)

    def _api_versions(self, version: int) -> bytes:
        if version >= 3:  # flexible: compact array, tagged fields
            keys = b"".join(struct.pack(">hhh", *k) + encode_uvarint(0) for k in SPOKEN)
            return (
                struct.pack(">h", 0)
                + encode_uvarint(len(SPOKEN) + 1)
                + keys
                + struct.pack(">i", 0)
                + encode_uvarint(0)
            )
        keys = b"".join(struct.pack(">hhh", *k) for k in SPOKEN)
        throttle = struct.pack(">i", 0) if version >= 1 else b""
        return struct.pack(">hi", 0, len(SPOKEN)) + keys + throttle

    def _metadata(self, version: int) -> bytes:
        self.metadata_answers += 1
        if self.empty.is_set():
            brokers: list[tuple[int, str, int]] = []
            controller = -1
        else:
            brokers = [(self.node_id, "127.0.0.1", self.port)]
            controller = self.node_id
        out = struct.pack(">i", len(brokers))
        for node_id, host, port in brokers:
            out += struct.pack(">i", node_id) + _string(host) + struct.pack(">i", port)
            if version >= 1:
                out += _string(None)  # rack
        if version >= 2:
            out += _string("fresh-zk-broker")  # cluster id
        if version >= 1:
            out += struct.pack(">i", controller)
        return out + struct.pack(">i", 0)  # no topics


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--librdkafka", action="store_true", help="ask librdkafka's DescribeCluster")
    args = ap.parse_args()
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from clusters.topology import build_topology
    from workloads.admin import AdminWorkload, admin_conf

    broker = FreshZkBroker()
    topo = build_topology("kraft-combined", cluster="fresh-zk", subnet="10.213.82.0/24")
    wl = AdminWorkload(AdminWorkload.generator(None), topo, 1, "fresh-zk")
    node = sorted(wl.admins)[0]
    # The workload's own client configuration, pointed at this listener.
    wl.admins = {node: AdminClient(admin_conf("127.0.0.1", broker.port))}
    wl.ids = {broker.node_id: node}
    print("before:", wl.describe_cluster(node), flush=True)
    broker.empty.set()
    try:
        if args.librdkafka:
            got = wl.admins[node].describe_cluster(request_timeout=5).result(timeout=10)
            print("after: librdkafka answered", got, flush=True)
        else:
            print("after:", wl.describe_cluster(node, timeout=3), flush=True)
    except KafkaException as exc:
        print(f"after: KafkaException {exc.args[0].name()}", flush=True)
    print(f"metadata answers: {broker.metadata_answers}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
