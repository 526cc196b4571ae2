"""A kazoo client that keeps asking while ZooKeeper forms its quorum."""

from __future__ import annotations

from typing import Any

# kazoo's default connection retry doubles its pause each time (up to an hour): against a port
# that refused, its attempts came 0.14, 0.22, 0.48, 1.0, 2.8 and 7.3 s apart, and none in the next
# 8 s. An ensemble that formed its quorum late on busy cores was then not asked again before a
# 60 s wait ran out (CI, session 4: a migration cluster's /cluster/id seed).
MAX_PAUSE_S = 1.0


def zk_client(hosts: str, timeout: float, read_only: bool = False) -> Any:
    """A KazooClient for `hosts` whose connection attempts are never more than MAX_PAUSE_S
    apart."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=MAX_PAUSE_S)
    return KazooClient(hosts=hosts, timeout=timeout, read_only=read_only, connection_retry=retry)
