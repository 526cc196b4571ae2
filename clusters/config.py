"""Node configuration: server.properties, zoo.cfg, logging and the entrypoint, rendered as text.

Everything a node needs is rendered here and copied into its container before it starts, so the
image stays generic and a config can be unit-tested without Docker.
"""

from __future__ import annotations

import base64
import re
import shlex
import uuid
from dataclasses import dataclass

from clusters.byteman import BYTEMAN_PORT
from clusters.errors import ClusterError
from clusters.kafka_dist import BYTEMAN_JAR, JOLOKIA_JAR, KafkaDist, parse_version
from clusters.layout import IMAGE_LAYOUT, Layout
from clusters.migration import initial_phase, migration_properties
from clusters.quorum import (
    auto_join_properties,
    configured_dynamic,
    format_options,
    quorum_properties,
)
from clusters.topology import (
    BROKER_PORT,
    CONTROLLER_PORT,
    JOLOKIA_PORT,
    ZK_CLIENT_PORT,
    NodeSpec,
    Topology,
)

TIMINGS = ("default", "fast")
# The node image's paths (clusters/layout.py); an SSH host's are under its inventory's
# directories, and each function below that names a path takes the node's ``layout``.
CONF_DIR = IMAGE_LAYOUT.conf_dir
DATA_DIR = IMAGE_LAYOUT.data_dir
# Every assembled Kafka version, mounted read-only into every node: a rolling upgrade restarts a
# node on another version's jars without recreating its container (same data, same id).
DISTS_DIR = IMAGE_LAYOUT.dists_dir
AGENTS_DIR = IMAGE_LAYOUT.agents_dir
# When this file exists in a node, the entrypoint starts the JVM under libfaketime with it.
FAKETIME_ENV = IMAGE_LAYOUT.faketime_env
# When this file exists in a re-provisioned controller, its next start empties its data
# directory first (steps/quorum_steps.py): a new disk, hence a new directory id (KIP-853).
WIPE_MARKER = IMAGE_LAYOUT.wipe_marker

# Short heartbeats, sessions and elections, so fault tests see failover in seconds, not minutes.
FAST_KRAFT = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "1000",
}
FAST_ZK = {"zookeeper.session.timeout.ms": "4000"}
FAST_COMMON = {"replica.lag.time.max.ms": "5000"}
# KIP-848's consumer groups (`group.protocol=consumer`) take their session and heartbeat from
# the group coordinator, not the client (which refuses session.timeout.ms and
# heartbeat.interval.ms under that protocol). Kafka's defaults (45 s sessions, 5 s heartbeats,
# the minimums the same) would make a member's failure take most of a short run to notice, so
# every broker of 4.0 and later gets what the queue workload's classic subscribers ask for
# themselves (6 s, 1 s), in both timing profiles, so both protocols are judged at the same
# pace. The minimums go down with them: Kafka refuses a session or heartbeat below its minimum.
# Classic groups read none of these.
CONSUMER_GROUP_FROM = (4, 0)
CONSUMER_GROUP = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
}


@dataclass(frozen=True)
class NodeConfig:
    """What a node container needs: files to place in it and the command it runs as PID 1."""

    files: dict[str, str]
    command: list[str]


def new_cluster_id() -> str:
    """A random UUID in URL-safe base64 without padding, as kafka-storage makes cluster ids.
    Never one starting with "-": `kafka-storage format --cluster-id -x…` reads it as an option
    and prints its usage (1 cluster in 64 failed to start); Kafka's Uuid.randomUuid skips those
    too."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def check_timing(timing: str) -> None:
    if timing not in TIMINGS:
        raise ClusterError(f"unknown timing profile '{timing}': choose one of {', '.join(TIMINGS)}")


def _props(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def server_properties(
    topo: Topology,
    node: NodeSpec,
    timing: str,
    phase: str | None = None,
    version: str = "3.9",
    ibp: str | None = None,
    extra: dict[str, str] | None = None,
    dynamic: bool | None = None,
    layout: Layout = IMAGE_LAYOUT,
) -> dict[str, str]:
    """A Kafka node's properties; ``phase`` (migration topology only) is its migration phase;
    ``ibp`` (ZooKeeper mode) the inter.broker.protocol.version if not the version's own;
    ``extra`` what a run's steps need beyond these (steps/upgrade.py); ``dynamic`` whether it
    finds a dynamic quorum (KIP-853; default: as the topology starts)."""
    check_timing(timing)
    replication = str(min(3, len(topo.brokers)))
    min_isr = str(min(2, len(topo.brokers)))
    props: dict[str, str] = {}
    listeners = []
    if topo.migration:
        props = migration_properties(topo, node, phase or initial_phase(node), version)
    elif topo.kraft:
        props["process.roles"] = ",".join(r for r in ("broker", "controller") if r in node.roles)
        props["node.id"] = str(node.node_id)
        dynamic = configured_dynamic(topo) if dynamic is None else dynamic
        props.update(quorum_properties(topo, dynamic))
        if dynamic:
            props.update(auto_join_properties(topo, node))
        props["controller.listener.names"] = "CONTROLLER"
        if node.is_controller:
            listeners.append(f"CONTROLLER://{node.ip}:{CONTROLLER_PORT}")
        props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    else:
        props["broker.id"] = str(node.node_id)
        props["zookeeper.connect"] = topo.zookeeper_connect()
        # Pinned, as Kafka's ZooKeeper-mode upgrade notes ask: the software rolls first, the
        # protocol is bumped in a second roll (steps/upgrade.py).
        props["inter.broker.protocol.version"] = ibp or ".".join(version.split(".")[:2])
    if node.is_broker and not topo.migration:
        listeners.insert(0, f"PLAINTEXT://{node.ip}:{BROKER_PORT}")
        props["advertised.listeners"] = f"PLAINTEXT://{node.ip}:{BROKER_PORT}"
        props["inter.broker.listener.name"] = "PLAINTEXT"
    if not topo.migration:
        props["listeners"] = ",".join(listeners)
    props["log.dirs"] = layout.data_dir
    props.update(
        {
            "auto.create.topics.enable": "false",
            "default.replication.factor": replication,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replication,
            # The default 50 partitions take long to create on two cores and test nothing more.
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": "5",
            "unclean.leader.election.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            # The log cleaner allocates its dedupe buffer (default 128 MiB) as one heap array
            # when it starts; on a node's small heap, right after log recovery, that failed now
            # and then with "OutOfMemoryError: Java heap space" and a restarted node exited.
            # Only the internal compacted topics use the cleaner here: 16 MiB is ample.
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }
    )
    if node.is_broker and (*parse_version(version), 0)[:2] >= CONSUMER_GROUP_FROM:
        props.update(CONSUMER_GROUP)
    if timing == "fast":
        props.update(FAST_COMMON)
        # A migrating node talks to both ZooKeeper and the KRaft quorum, whatever its phase.
        if topo.kraft:
            props.update(FAST_KRAFT)
        if topo.zookeepers:
            props.update(FAST_ZK)
    props.update(extra or {})
    return props


def zoo_cfg(topo: Topology, timing: str, layout: Layout = IMAGE_LAYOUT) -> dict[str, str]:
    check_timing(timing)
    cfg = {
        "tickTime": "500" if timing == "fast" else "2000",
        "initLimit": "20",
        "syncLimit": "10",
        "dataDir": layout.zk_data_dir,
        "clientPort": str(ZK_CLIENT_PORT),
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
    }
    if len(topo.zookeepers) > 1:
        for z in topo.zookeepers:
            cfg[f"server.{z.node_id}"] = f"{z.ip}:2888:3888"
    return cfg


LOG4J1 = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.controller=INFO
log4j.logger.state.change.logger=INFO
"""

LOG4J2 = """status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
"""


def jvm_options(dist: KafkaDist, heap_mb: int, layout: Layout = IMAGE_LAYOUT) -> list[str]:
    conf = layout.conf_dir
    if dist.line.logging == "reload4j":
        logging = f"-Dlog4j.configuration=file:{conf}/log4j.properties"
    else:
        logging = f"-Dlog4j2.configurationFile={conf}/log4j2.properties"
    return [
        f"-Xms{min(heap_mb, 128)}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        logging,
        f"-javaagent:{layout.agents_dir}/{JOLOKIA_JAR}=host=0.0.0.0,port={JOLOKIA_PORT},"
        "discoveryEnabled=false",
    ]


def byteman_agent(node: NodeSpec, layout: Layout = IMAGE_LAYOUT) -> str:
    """Byteman's agent with its rule listener on the node's own cluster address only (never
    0.0.0.0): the harness host and the nodes reach it, nothing outside the network does.
    Kafka JVMs only: no fault kind hooks ZooKeeper."""
    return (
        f"-javaagent:{layout.agents_dir}/{BYTEMAN_JAR}=listener:true,address:{node.ip},"
        f"port:{BYTEMAN_PORT}"
    )


def node_classpath(dist: KafkaDist, layout: Layout = IMAGE_LAYOUT) -> str:
    """The version's jars as a node sees them (clusters/docker_lifecycle.py mounts them; an SSH
    host has them installed, clusters/ssh_install.py)."""
    return f"{layout.dists_dir}/{dist.version}/libs/*"


def running_version(cmdline: str, layout: Layout = IMAGE_LAYOUT) -> str | None:
    """The Kafka version a node's JVM runs, from its command line (``/proc/<pid>/cmdline``, NUL-
    or space-separated): the version directory of its classpath, which an upgrade roll changes
    node by node. None for a command line without one."""
    found = re.search(rf"{re.escape(layout.dists_dir)}/([^/\s\x00]+)/libs/", cmdline)
    return found.group(1) if found else None


def feature_options(features: dict[str, int] | None) -> list[str]:
    """`kafka-storage format --feature name=level` for each feature (Kafka 4.0+; the spelling
    is the same in 4.0 and 4.4): the level the cluster's bootstrap metadata finalizes in place
    of the release's default. None or {}: none, the command as it always was."""
    return [
        arg for name, level in (features or {}).items() for arg in ("--feature", f"{name}={level}")
    ]


def _entrypoint(node: NodeSpec, main: list[str], prepare: str, layout: Layout) -> str:
    # The JVM must be PID 1 (exec) so that signals sent to the container reach Kafka itself;
    # on a host, the pid its supervisor started, for the same reason.
    # The disk layer (clusters/disk_layer.py), when the node has its script, is mounted before
    # anything touches the data directory.
    env, disk = layout.faketime_env, layout.disk_layer_script
    return f"""#!/bin/sh
set -e
if [ -f {disk} ]; then . {disk}; fi
{prepare}
if [ -f {env} ]; then . {env}; fi
exec {shlex.join(main)}
"""


def render_node(
    topo: Topology,
    node: NodeSpec,
    dist: KafkaDist,
    timing: str,
    cluster_id: str,
    heap_mb: int = 256,
    phase: str | None = None,
    ibp: str | None = None,
    extra: dict[str, str] | None = None,
    dynamic: bool | None = None,
    fresh: bool = False,
    features: dict[str, int] | None = None,
    layout: Layout = IMAGE_LAYOUT,
) -> NodeConfig:
    """All files and the PID-1 command for one node (``phase``: its migration phase; ``ibp``:
    ZooKeeper mode's pinned inter.broker.protocol.version; ``dynamic``: configured for a dynamic
    quorum, by default as the topology starts; ``fresh``: a controller re-provisioned to join a
    dynamic quorum, whose next start wipes its data if WIPE_MARKER is there; ``features``: the
    feature levels a KRaft node is formatted with, ``feature_options``; ``layout``: where the
    node keeps its files, the node image's unless it is a host)."""
    conf, data = layout.conf_dir, layout.data_dir
    files: dict[str, str] = {}
    logging_file = "log4j.properties" if dist.line.logging == "reload4j" else "log4j2.properties"
    files[f"{conf}/{logging_file}"] = LOG4J1 if dist.line.logging == "reload4j" else LOG4J2
    classpath = node_classpath(dist, layout)
    if node.is_zookeeper:
        if not dist.line.zookeeper:
            raise ClusterError(f"Kafka {dist.version} has no ZooKeeper mode (removed in 4.0)")
        files[f"{conf}/zoo.cfg"] = _props(zoo_cfg(topo, timing, layout))
        main = [
            "java",
            *jvm_options(dist, min(heap_mb, 128), layout),
            "-cp",
            classpath,
            dist.classes["zookeeper"],
            f"{conf}/zoo.cfg",
        ]
        prepare = (
            f"mkdir -p {layout.zk_data_dir} && echo {node.node_id} > {layout.zk_data_dir}/myid"
        )
    else:
        dynamic = configured_dynamic(topo) if dynamic is None else dynamic
        props = server_properties(
            topo, node, timing, phase, dist.version, ibp, extra, dynamic, layout
        )
        files[f"{conf}/server.properties"] = _props(props)
        main = [
            "java",
            *jvm_options(dist, heap_mb, layout),
            byteman_agent(node, layout),
            "-cp",
            classpath,
            dist.classes["kafka"],
            f"{conf}/server.properties",
        ]
        prepare = f"mkdir -p {data}"
        # Migrating brokers keep the meta.properties their ZooKeeper-mode start wrote.
        if topo.kraft and not (topo.migration and node.is_broker):
            # Formatting runs once per container: a restarted node keeps its formatted data.
            fmt = [
                "java",
                "-Xmx96m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                f"-Dlog4j.configuration=file:{conf}/log4j.properties",
                f"-Dlog4j2.configurationFile={conf}/log4j2.properties",
                "-cp",
                classpath,
                dist.classes["storage"],
                "format",
                "-t",
                cluster_id,
                "-c",
                f"{conf}/server.properties",
                "--ignore-formatted",
                *format_options(topo, node, cluster_id, dynamic, fresh),
                *feature_options(features),
            ]
            if fresh:
                prepare = (
                    f"if [ -f {layout.wipe_marker} ]; then rm -rf {data} {layout.wipe_marker}; fi\n"
                    + prepare
                )
            prepare += f"\nif [ ! -f {data}/meta.properties ]; then {shlex.join(fmt)}; fi"
    files[f"{conf}/entrypoint.sh"] = _entrypoint(node, main, prepare, layout)
    return NodeConfig(files=files, command=["/bin/sh", f"{conf}/entrypoint.sh"])
