"""kazoo keeps asking ZooKeeper at least once a second, however long it has been refused."""

import contextlib
import itertools
import socket
import time

from kazoo.client import KazooClient

from clusters.zk_client import MAX_PAUSE_S, zk_client


def _attempt_gaps(zk, wait: float) -> list[float]:
    """Seconds between connection attempts to a loopback port that refuses, over `wait`,
    including the time from the last attempt to the end of the wait."""
    attempts = []
    connect = zk.handler.create_connection
    zk.handler.create_connection = lambda *a, **k: (
        attempts.append(time.monotonic()),
        connect(*a, **k),
    )[1]
    start = time.monotonic()
    with contextlib.suppress(Exception):
        zk.start(timeout=wait)
    end = time.monotonic()
    zk.stop()
    zk.close()
    times = [start, *attempts, end]
    return [b - a for a, b in itertools.pairwise(times)]


def _refusing_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_attempts_stay_at_most_a_second_apart():
    gaps = _attempt_gaps(zk_client(f"127.0.0.1:{_refusing_port()}", timeout=6), 6)
    assert len(gaps) >= 6 and max(gaps) <= MAX_PAUSE_S + 0.6  # jitter adds up to 0.4 s


def test_kazoos_default_would_leave_longer_gaps():
    # Why zk_client exists: kazoo's own retry backs off (or gives up) far beyond a second.
    port = _refusing_port()
    gaps = _attempt_gaps(KazooClient(hosts=f"127.0.0.1:{port}", timeout=6), 6)
    assert max(gaps) > MAX_PAUSE_S + 0.6
