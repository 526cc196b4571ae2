"""A kazoo client that keeps asking while ZooKeeper forms its quorum."""

from __future__ import annotations

from typing import Any

# kazoo's default connection retry doubles its pause up to an hour: after a refused connection
# at 0 s it asks again at about 0.1, 0.3, 0.7, ... 25.5, 51.1 and 102.3 s, so an ensemble that
# came up at 52 s on busy cores was not asked again before a 60 s wait ran out (CI, session 4).
MAX_PAUSE_S = 1.0


def zk_client(hosts: str, timeout: float, read_only: bool = False) -> Any:
    """A KazooClient for `hosts` whose connection attempts are never more than MAX_PAUSE_S
    apart."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=MAX_PAUSE_S)
    return KazooClient(hosts=hosts, timeout=timeout, read_only=read_only, connection_retry=retry)
