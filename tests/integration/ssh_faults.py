"""Leaves faults on a cluster over SSH and exits, as a crashed run would (a partition, a killed
JVM under a partition, a paused JVM): tests/integration/test_ssh_hosts.py then heals them with
`kchaos heal --hosts`. Usage: python -m tests.integration.ssh_faults HOSTS_YAML"""

from __future__ import annotations

import sys

from clusters.handles import open_cluster
from nemesis.api import FaultContext, FaultStep
from nemesis.registry import build


def main(path: str) -> None:
    cluster = open_cluster(hosts=path)
    info = cluster.info()
    ctx = FaultContext(info.topology, cluster.nodes(info))
    nem = build(["partition", "kill", "pause"])
    nem["partition"].start(ctx, FaultStep(0, "start", "partition", "random-halves", seed=1))
    nem["kill"].start(ctx, FaultStep(0, "start", "kill", "one", seed=2))
    nem["pause"].start(ctx, FaultStep(0, "start", "pause", "all", seed=3))  # the running ones
    cluster.close()


if __name__ == "__main__":
    main(sys.argv[1])
