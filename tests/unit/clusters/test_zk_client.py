"""kazoo keeps asking ZooKeeper at least once a second, however long it has been refused: the
connection loop's retry (the client's ``_conn_retry``, which kazoo copies into its connection
handler) is driven by hand, its pauses recorded instead of slept."""

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from clusters.zk_client import MAX_PAUSE_S, zk_client


def _pauses(zk: KazooClient, refusals: int) -> list[float]:
    """The pauses the client's connection retry takes between `refusals` refused attempts."""
    slept: list[float] = []
    retry = zk._conn_retry.copy()
    retry.sleep_func = slept.append
    retry.interrupt = None
    left = iter(range(refusals))

    def attempt() -> str:
        if next(left, None) is not None:
            raise ConnectionLoss("refused")
        return "connected"

    assert retry(attempt) == "connected"
    return slept


def test_connection_attempts_stay_at_most_a_second_apart():
    zk = zk_client("127.0.0.1:2181", timeout=6)
    pauses = _pauses(zk, 60)
    # Never gives up, and kazoo's jitter (up to 40%) is the only stretch of the one-second cap.
    assert len(pauses) == 60
    assert max(pauses) <= MAX_PAUSE_S * (1 + zk._conn_retry.max_jitter)


def test_kazoos_default_would_leave_longer_gaps():
    # Why zk_client exists: kazoo's own retry backs off (or gives up) far beyond a second.
    pauses = _pauses(KazooClient(hosts="127.0.0.1:2181", timeout=6), 12)
    assert max(pauses) > MAX_PAUSE_S * 1.4
