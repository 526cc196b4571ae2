"""kazoo keeps asking ZooKeeper at least once a second, however long it has been refused."""

import socket
import time

from clusters.zk_client import MAX_PAUSE_S, zk_client


def test_connection_attempts_stay_at_most_a_second_apart():
    # A loopback port that refuses: count the attempts kazoo makes in 6 s.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    zk = zk_client(f"127.0.0.1:{port}", timeout=6)
    pauses = []
    sleeper = zk._connection.retry_sleeper  # what the connection loop copies its pauses from
    sleep = sleeper.sleep_func
    sleeper.sleep_func = lambda d: (pauses.append(d), sleep(d))
    start = time.monotonic()
    try:
        zk.start(timeout=6)
    except Exception:
        pass
    finally:
        zk.stop()
        zk.close()
    assert time.monotonic() - start >= 5
    assert len(pauses) >= 6 and max(pauses) <= MAX_PAUSE_S + 0.5  # jitter adds up to 0.4 s
