"""Clean shutdowns as faults, and KIP-966's "last replica standing" choreography.

Kafka's own system test for Eligible Leader Replicas (``eligible_leader_replicas_test``):
cleanly stop two replicas of a partition (RF 3, min.insync.replicas 2), uncleanly stop its
leader, restart the clean two; one of them must be in the ELR and become leader, with every
acknowledged message still readable. The kind ``elr-last-replica`` is that sequence as one
fault, so every checker sees it as data (effects) like any other:

- start: the leader of a partition of the queue's topic (the harness's hints, chosen by the
  step's seed) is found; its two followers are stopped cleanly, one after the other (SIGTERM and
  Kafka's controlled shutdown: docker stop, or the host's service stop), then the leader is
  killed (SIGKILL). A cluster without exactly three brokers beside dedicated controllers is
  refused before anything is touched: stopping two of three combined nodes would take the
  controller quorum down with them, and with more brokers the partition's replicas are not
  known from the hints;
- stop: the two clean ones are started again, and their own DescribeTopicPartitions answers
  are watched (clusters/topic_partitions.py) until one of them leads the partition, for at
  most LEAD_TIMEOUT_S: what they said is recorded (`after_restart`, `elected`). Then the killed
  leader is started too. Kafka before 4.0, or 4.0 without eligible.leader.replicas.version,
  keeps no ELR: no restarted replica can lead (unclean elections are off), and the partition
  waits for the killed leader; the record says so (`elected` null).

``elr-power-loss`` is the same sequence with the leader's unclean shutdown a power loss
(nemesis/disk.py ``lose_power``: SIGSTOP, what no fsync made durable dropped, SIGKILL), which a
kill never is: the leader restarts on what its disk kept, under Kafka's default flush policy
without the writes it acknowledged last. KIP-966 names this case: ELR gives "MinISR-1
tolerance to data loss unclean shutdown events". Its record is a power loss's too (``dropped``
with ``lost_offsets``, docs/history.md). The run's nodes are on the disk layer (nemesis/items.py
``on_disk_layer``); not a kind a bare ``shutdown`` draws.
"""

from __future__ import annotations

import random
import time
from typing import Any

from clusters.capabilities import Controllable
from clusters.errors import ClusterError
from clusters.topic_partitions import PartitionsUnavailable, describe_partitions
from clusters.topology import BROKER_PORT, Topology
from history.effects import DOWN, EFFECTS, RESTARTED, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.disk import BY as POWER_LOSS_BY
from nemesis.disk import check_on_layer, lose_power
from nemesis.errors import NemesisError, before_touching
from nemesis.menu import Kind, Menu
from nemesis.nodes import on_each, wait_for
from nemesis.process import restart_exited
from nemesis.targets import partition_leader, resolve

ELR_LAST_REPLICA = "elr-last-replica"
ELR_POWER_LOSS = "elr-power-loss"
# The kinds that act on the disk layer: a run naming one runs every node on it.
ON_DISK_LAYER = (ELR_POWER_LOSS,)
CLEAN_STOP = "clean-stop"
# A clean shutdown: Kafka's controlled shutdown under fast timing takes seconds; the node's own
# stop escalates to SIGKILL after this long.
STOP_TIMEOUT_S = 60
# How long the restarted clean replicas are watched for one of them to lead.
LEAD_TIMEOUT_S = 60
POLL_S = 0.5

MENU = Menu(
    "shutdown",
    kinds=(
        Kind(
            CLEAN_STOP,
            "the step's target (one or minority) stopped cleanly: SIGTERM and Kafka's "
            "controlled shutdown; stop starts every exited node",
        ),
        Kind(
            ELR_LAST_REPLICA,
            "KIP-966's system test: a partition's two followers stopped cleanly, then its "
            "leader killed; stop starts the two, waits for one to lead, then starts the leader "
            "(kraft: three brokers beside dedicated controllers)",
            only_on=("kraft",),
        ),
        Kind(
            ELR_POWER_LOSS,
            "elr-last-replica with the leader's power lost instead of its JVM killed: what no "
            "fsync made durable dropped from its disk (the disk layer)",
            only_on=("kraft",),
            drawn=False,
        ),
    ),
    meaning="clean shutdowns (SIGTERM, controlled shutdown) choreographed with a kill or a power "
    "loss; stop starts every exited node",
    effects=(DOWN,),
    stop_effects=(RESTARTED,),
    targets=("one", "minority"),
    targets_note="clean-stop: the step's target; elr-last-replica and elr-power-loss: a "
    "partition's leader and its followers",
    target_kinds=(CLEAN_STOP,),
)


def roles(
    topo: Topology, hints: dict[str, Any], rng: random.Random, kind: str = ELR_LAST_REPLICA
) -> tuple[str, str, list[str]]:
    """(the partition, its leader, its two followers); NemesisError for a cluster without
    exactly three brokers beside dedicated controllers."""
    brokers = [n for n in topo.brokers if not n.is_controller]
    if len(brokers) != 3 or len(brokers) != len(topo.brokers):
        raise NemesisError(
            f"shutdown {kind} needs three brokers beside dedicated controllers "
            "(--topology kraft): a partition's three replicas are then every broker"
        )
    found = partition_leader(topo, hints, {}, rng)
    partition = str((found.evidence or {}).get("partition", ""))
    if not partition:
        raise NemesisError(f"shutdown {kind}: no partition leader hint from the workload")
    leader = found.targets[0]
    return partition, leader, sorted(n.name for n in brokers if n.name != leader)


class ShutdownNemesis:
    fault = "shutdown"
    menu = MENU

    def __init__(self) -> None:
        # What the last start chose (partition, followers), for its stop: drawn again from the
        # seed, the hints would have moved on.
        self.chosen: tuple[str, list[str]] | None = None

    def check(self, step: FaultStep) -> dict[str, Any]:
        MENU.check_keys(step)
        return {}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        if step.kind == CLEAN_STOP:
            return self._clean_stop(ctx, step)
        with before_touching():
            self.check(step)
            partition, leader, followers = roles(
                ctx.topology, ctx.hints, random.Random(step.seed), step.kind
            )
            lead = ctx.nodes[leader]
            if step.kind == ELR_POWER_LOSS and lead.is_running():
                check_on_layer([lead])
        self.chosen = (partition, followers)
        stopped: dict[str, float] = {}
        for name in followers:  # one after the other: the second takes the ISR below min ISR
            node = ctx.nodes[name]
            if node.is_running():
                t0 = time.monotonic()
                node.stop(STOP_TIMEOUT_S)
                wait_for(f"{name} to stop", lambda n=node: not n.is_running(), timeout=30)
                stopped[name] = round(time.monotonic() - t0, 3)
        out: dict[str, Any] = {
            "kind": step.kind,
            "partition": partition,
            "leader": leader,
            "followers": followers,
            "stopped_after_s": stopped,
        }
        if step.kind == ELR_POWER_LOSS:
            lost = lose_power([lead] if lead.is_running() else [])
            out.update(lost)
            down = effect(DOWN, [leader], lost["exited_after_s"], by=POWER_LOSS_BY)
        else:
            killed = {}
            if lead.is_running():
                lead.kill()
                killed[leader] = wait_for(f"{leader} to exit", lambda: not lead.is_running(), 30)
            out["exited_after_s"] = killed
            down = effect(DOWN, [leader], killed, by="SIGKILL")
        return {**out, EFFECTS: [effect(DOWN, followers, stopped, by="SIGTERM"), down]}

    def _clean_stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        with before_touching():
            self.check(step)
            found = resolve(ctx, step.target or "one", random.Random(step.seed), step.params)
        nodes = [ctx.nodes[n] for n in found.targets]

        def down(node: Controllable) -> float | None:
            if not node.is_running():
                return None
            t0 = time.monotonic()
            node.stop(STOP_TIMEOUT_S)
            wait_for(f"{node.name} to stop", lambda: not node.is_running(), timeout=30)
            return round(time.monotonic() - t0, 3)

        took = {n: t for n, t in on_each(nodes, down).items() if t is not None}
        out = {"kind": step.kind, **found.record(), "stopped_after_s": took}
        return {**out, EFFECTS: [effect(DOWN, found.targets, took, by="SIGTERM")]}

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        if step.kind == CLEAN_STOP:
            restarted = restart_exited(ctx)
            return {
                "kind": step.kind,
                "restarted": restarted,
                EFFECTS: [effect(RESTARTED, restarted)],
            }
        """The clean two first, watched until one leads; then every other exited node."""
        if self.chosen is not None:
            partition, followers = self.chosen
        else:  # a stop without its start (a replay cut short): every broker that is down
            partition = ""
            followers = sorted(
                n.name for n in ctx.topology.brokers if not ctx.nodes[n.name].is_running()
            )
        self.chosen = None
        clean = [ctx.nodes[n] for n in followers if not ctx.nodes[n].is_running()]

        def up(node: Controllable) -> float:
            node.start()
            return wait_for(f"{node.name} to run again", node.is_running, timeout=60)

        on_each(clean, up)
        seen, took = _watch(ctx, followers, partition) if partition else (None, 0.0)
        elected = seen.get("leader_name") if seen else None
        rest = restart_exited(ctx)
        restarted = sorted({n.name for n in clean} | set(rest))
        return {
            "kind": step.kind,
            "partition": partition,
            "after_restart": seen,
            "elected": elected,
            "watched_s": took,
            "restarted": restarted,
            EFFECTS: [effect(RESTARTED, restarted)],
        }

    def heal_all(self, ctx: FaultContext) -> list[str]:
        return [f"{n}: started exited node" for n in restart_exited(ctx)]


def _watch(
    ctx: FaultContext, followers: list[str], partition: str
) -> tuple[dict[str, Any] | None, float]:
    """Each restarted follower's own view of the partition, until one says a follower leads;
    the last view seen and the seconds it took (or the bound)."""
    # The queue workload's hints name a partition by its number alone ("6"); others may say
    # "topic-6". A number alone matches that partition of any topic that is not internal.
    topic, _, index = partition.rpartition("-")
    ids = {n.node_id: n.name for n in ctx.topology.nodes}
    t0 = time.monotonic()
    last: dict[str, Any] | None = None
    while time.monotonic() - t0 < LEAD_TIMEOUT_S:
        for name in followers:
            try:
                parts = describe_partitions(ctx.topology.node(name).ip, BROKER_PORT, 2.0)
            except (PartitionsUnavailable, ClusterError):
                continue
            for p in parts:
                if (not topic or p.get("topic") == topic) and str(p.get("partition")) == index:
                    last = {**p, "asked": name, "leader_name": ids.get(p.get("leader", -1))}
                    if last["leader_name"] in followers:
                        return last, round(time.monotonic() - t0, 3)
        time.sleep(POLL_S)
    return last, float(LEAD_TIMEOUT_S)
