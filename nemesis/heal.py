"""Undo every fault any package could have left on a cluster: after a crash, and on every exit."""

from __future__ import annotations

from clusters.capabilities import Controllable
from clusters.client_net import ClientNetworks
from clusters.cluster import Cluster
from nemesis.api import FaultContext
from nemesis.registry import HEAL_ORDER, build


def heal_cluster(cluster: Cluster[Controllable]) -> list[str]:
    """Heals all nodes of ``cluster`` and says what was undone; an empty list means clean.

    Idempotent: each package looks for its own traces (chain, qdisc, stopped JVM, preload,
    exited node, Byteman rules) and touches nothing else.
    """
    info = cluster.info()
    ctx = FaultContext(topology=info.topology, nodes=cluster.nodes(info))
    done: list[str] = []
    for nemesis in build(list(HEAL_ORDER)).values():
        done += nemesis.heal_all(ctx)
    # A client's network cut (client isolate) outlives a run that died: its rules are in the
    # cluster's client networks, which no node handle reaches.
    if isinstance(cluster, ClientNetworks):
        done += cluster.mend_client_nets()
    return done
