"""``kchaos cluster``: bring real Kafka clusters up and down, and see what each node says.

On Docker by default (``--name``); on the hosts of an SSH inventory with ``--hosts hosts.yaml``
(docs/ssh.md), whose cluster name is the inventory's."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich import box
from rich.table import Table

from clusters.cluster import ClusterHandle, UpOptions
from clusters.disk_layer import MAX_WRITEBACK_S, NAME_MODES
from clusters.errors import ClusterError
from clusters.handles import DEFAULT_NAME, list_clusters, open_cluster
from clusters.hold import Holder, check_name, holding, note_forced_removal
from clusters.kafka_dist import newest_line
from clusters.topology import DEFAULT_SUBNET, TOPOLOGIES, ZK_TOPOLOGIES, build_topology
from harness.cli.hosts import accept_option, hosts_option
from harness.console import console, print_json, say


class NameType(click.ParamType):
    """A cluster's (or SSH hosts') name, checked as the option is parsed: before any hold, engine
    or file, since names become container names and folders (clusters/hold.py's rule)."""

    name = "NAME"

    def __init__(self, noun: str = "cluster name") -> None:
        self.noun = noun

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        flag = param.opts[0] if param is not None and param.opts else None
        # ClusterError, not click's BadParameter: one line and exit 254, like every user error.
        check_name(value, flag, self.noun)
        return value


NAME = NameType()
name_option = click.option(
    "--name",
    type=NAME,
    default=DEFAULT_NAME,
    show_default=True,
    help="Cluster name (several can coexist).",
)
force_option = click.option(
    "--force",
    is_flag=True,
    help="Go ahead even if a run (or another command) holds the cluster (docs/clusters.md).",
)


@click.group()
def cluster() -> None:
    """Real Kafka clusters on Docker, or on SSH hosts (--hosts)."""


def _on_hosts(
    ctx: click.Context, hosts: Path | None, accept: bool, docker_only: tuple[str, ...]
) -> ClusterHandle | None:
    """The cluster on the inventory's hosts, or None without --hosts. What the inventory says
    (the cluster's name and shape) cannot also be given as an option."""
    if hosts is None:
        if accept:
            raise click.UsageError("--accept-new-host-keys goes with --hosts")
        return None
    given = [
        f"--{o.replace('_', '-')}"
        for o in docker_only
        if ctx.get_parameter_source(o) not in (ParameterSource.DEFAULT, None)
    ]
    if given:
        raise click.UsageError(
            f"{', '.join(given)}: with --hosts the inventory names the cluster and its nodes"
        )
    return open_cluster(hosts=hosts, accept_new_host_keys=accept, say=say)


def _refuse_inapplicable(ctx: click.Context, topology: str) -> None:
    """--zookeepers and --brokers given where the topology has no such nodes: refused before the
    hold and the engine, as `kchaos run` refuses them (history/options.py applies_with)."""
    given = {
        p: ctx.get_parameter_source(p) not in (ParameterSource.DEFAULT, None)
        for p in ("zookeepers", "brokers")
    }
    if given["zookeepers"] and topology not in ZK_TOPOLOGIES:
        raise click.UsageError(
            f"--zookeepers only applies with --topology {' or '.join(ZK_TOPOLOGIES)}, "
            f"not --topology {topology}"
        )
    if given["brokers"] and topology == "kraft-combined":
        raise click.UsageError(
            "--brokers does not apply with --topology kraft-combined (3 nodes, each broker and "
            "controller): use --topology kraft, zk or migration"
        )


@cluster.command()
@name_option
@click.option(
    "--topology",
    type=click.Choice(TOPOLOGIES),
    default="kraft-combined",
    show_default=True,
    help="kraft-combined (3 nodes, broker+controller), kraft (3 controllers + --brokers), zk "
    "(ZooKeeper + --brokers, Kafka 3.x), migration (ZooKeeper-mode brokers and KRaft "
    "controllers to migrate to).",
)
@click.option(
    "--version",
    help="Kafka version or line. Default: the newest line kchaos runs for the topology (4.4 for "
    "KRaft, 3.9 for zk and migration).",
)
@click.option(
    "--brokers",
    type=click.IntRange(1, 16),
    default=3,
    show_default=True,
    help="Brokers (kraft, zk and migration topologies).",
)
@click.option(
    "--zookeepers",
    type=click.Choice(["1", "3"]),
    default="1",
    show_default=True,
    help="ZooKeeper nodes with --topology zk or migration: 1 or 3.",
)
@click.option(
    "--timing",
    type=click.Choice(["default", "fast"]),
    default="default",
    show_default=True,
    help="fast: short heartbeats, sessions and elections for quick fault tests.",
)
@click.option(
    "--subnet",
    default=DEFAULT_SUBNET,
    show_default=True,
    help="The Docker network of the cluster (a CIDR).",
)
@click.option(
    "--heap-mb",
    type=click.IntRange(128, 65536),
    default=256,
    show_default=True,
    help="JVM heap of each Kafka node, in MiB.",
)
@click.option(
    "--no-wait", is_flag=True, help="Return once containers start, without waiting for readiness."
)
@click.option(
    "--disk-layer",
    type=click.Choice(NAME_MODES),
    default=None,
    help="Run the nodes' data directories on kchaos's disk layer (docs/disk.md) with this name "
    "mode: journal (as ext4) or strict (as POSIX).",
)
@click.option(
    "--disk-writeback",
    type=click.FloatRange(0, MAX_WRITEBACK_S),
    default=None,
    help="With --disk-layer: what has been pending this many seconds becomes durable, as a "
    "kernel's writeback makes it (default: only an fsync does).",
)
@force_option
@hosts_option
@accept_option
@click.pass_context
def up(
    ctx: click.Context,
    name: str,
    topology: str,
    version: str | None,
    brokers: int,
    zookeepers: str,
    timing: str,
    subnet: str,
    heap_mb: int,
    no_wait: bool,
    disk_layer: str | None,
    disk_writeback: float | None,
    force: bool,
    hosts: Path | None,
    accept_new_host_keys: bool,
) -> None:
    """Creates a cluster and waits until it is ready (leader elected, brokers unfenced)."""
    on_hosts = _on_hosts(
        ctx,
        hosts,
        accept_new_host_keys,
        ("name", "topology", "brokers", "zookeepers", "subnet", "disk_layer", "disk_writeback"),
    )
    name = on_hosts.cluster if on_hosts is not None else name
    if on_hosts is None:
        _refuse_inapplicable(ctx, topology)
    if version is None:
        fixed = on_hosts.fixed_topology(None) if on_hosts is not None else None
        version = newest_line(fixed.kind if fixed is not None else topology)
    if disk_writeback is not None and disk_layer is None:
        raise click.UsageError("--disk-writeback goes with --disk-layer")
    options = UpOptions(
        version,
        timing=timing,
        heap_mb=heap_mb,
        wait=not no_wait,
        disk_layer=disk_layer,
        disk_writeback_s=disk_writeback,
    )
    started = time.monotonic()
    with holding(name, "kchaos cluster up", force, "bring it up anyway", say):
        # Docker's engine is reached only once the hold is taken, as before any other step.
        handle = on_hosts or open_cluster(name, say=say)
        topo = handle.fixed_topology() or build_topology(
            topology, cluster=name, brokers=brokers, zookeepers=int(zookeepers), subnet=subnet
        )
        with console.status(f"bringing up {topo.kind} cluster '{name}' ({len(topo.nodes)} nodes)"):
            info = handle.up(topo, options, say=say)
    verb = "started" if no_wait else "ready"
    console.print(
        f"[green]cluster '{name}' {verb}[/green] in {time.monotonic() - started:.1f} s; "
        f"bootstrap servers {info.topology.bootstrap_servers()}"
    )


def _fresh_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """--collect writes cluster.json, logs/ and metadata/: only into a new or empty folder, so a
    stored run's evidence is never mixed with another cluster's (checked before any hold)."""
    if value is None:
        return None
    if value.is_symlink() or (value.exists() and not value.is_dir()):
        raise ClusterError(f"--collect {value}: not a folder; give a new or empty folder")
    if value.is_dir() and any(value.iterdir()):
        raise ClusterError(
            f"--collect {value}: not empty (a run directory's evidence is its own); give a new "
            "or empty folder"
        )
    return value


@cluster.command()
@name_option
@click.option(
    "--collect",
    type=click.Path(path_type=Path),
    callback=_fresh_folder,
    help="First copy node logs and decoded metadata logs into this directory (new or empty).",
)
@force_option
@hosts_option
@accept_option
@click.pass_context
def down(
    ctx: click.Context,
    name: str,
    collect: Path | None,
    force: bool,
    hosts: Path | None,
    accept_new_host_keys: bool,
) -> None:
    """Removes every container and network of the cluster (after collecting, if asked).

    On SSH hosts: undoes every fault first (a host's iptables chains and qdiscs outlive its
    node), then stops the JVMs and removes what the cluster put there; the installed Kafka jars
    stay for the next cluster. Refused while a run uses the cluster, unless --force (the run
    then ends with an error)."""
    on_hosts = _on_hosts(ctx, hosts, accept_new_host_keys, ("name",))
    name = on_hosts.cluster if on_hosts is not None else name

    def tell_holder(holder: Holder | None) -> None:
        note_forced_removal(name, holder, "kchaos cluster down --force")

    does = "remove it anyway (the run on it then ends with an error)"
    with holding(name, "kchaos cluster down", force, does, say, tell_holder):
        if on_hosts is not None:
            from nemesis.heal import heal_cluster

            if on_hosts.exists():
                for action in heal_cluster(on_hosts):
                    say(f"healed: {action}")
            removed = on_hosts.down(collect=collect, say=say)
            console.print(f"cluster '{name}': removed from {removed} hosts")
            return
        removed = open_cluster(name, say=say).down(collect=collect, say=say)
    console.print(f"cluster '{name}': removed {removed} containers and networks")


@cluster.command(name="list")
def list_() -> None:
    """Lists the clusters kchaos made on this engine."""
    for name in list_clusters():
        click.echo(name)


@cluster.command()
@name_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@hosts_option
@accept_option
@click.pass_context
def status(
    ctx: click.Context, name: str, as_json: bool, hosts: Path | None, accept_new_host_keys: bool
) -> None:
    """Each node's processes and its own view of the quorum."""
    from clusters.status import cluster_status

    on_hosts = _on_hosts(ctx, hosts, accept_new_host_keys, ("name",))
    st = cluster_status(on_hosts or open_cluster(name, say=say))
    if as_json:
        print_json(st)
    else:
        render_status(st)


@cluster.command()
@name_option
@click.argument("node")
@click.option(
    "--tail", type=click.IntRange(0, 10_000_000), default=None, help="Only the last N lines."
)
@hosts_option
@accept_option
@click.pass_context
def logs(
    ctx: click.Context,
    name: str,
    node: str,
    tail: int | None,
    hosts: Path | None,
    accept_new_host_keys: bool,
) -> None:
    """Prints a node's log."""
    dc = _on_hosts(ctx, hosts, accept_new_host_keys, ("name",)) or open_cluster(name, say=say)
    info = dc.info()
    info.topology.node(node)
    sys.stdout.write(dc.nodes(info)[node].logs(tail=tail))


ROLE_LETTERS = {"broker": "B", "controller": "C", "zookeeper": "Z"}
# KRaft broker lifecycle (KIP-631): STARTING until registered, RECOVERY while fenced.
BROKER_WORDS = {
    "RUNNING": "unfenced",
    "RECOVERY": "fenced",
    "STARTING": "unregistered",
    "PENDING_CONTROLLED_SHUTDOWN": "shutting down",
    "SHUTTING_DOWN": "shutting down",
    None: "?",
}


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def render_status(st: dict[str, Any]) -> None:
    console.print(
        f"cluster [bold]{st['cluster']}[/bold]: {st['topology']}, Kafka {st['version']}, "
        f"timing {st['timing']}"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in (
        "node",
        "roles",
        "process",
        "raft",
        "leader",
        "epoch",
        "hw",
        "broker",
        "md off",
        "active",
    ):
        table.add_column(col, no_wrap=True)
    for n in st["nodes"]:
        jmx = n.get("jmx") or {}
        raft = jmx.get("raft") or {}
        broker = "-"
        if "broker" in n["roles"]:
            state = jmx.get("broker_state")
            # Fencing is a KRaft notion; a ZooKeeper-mode broker is just running or not.
            words = BROKER_WORDS if st["topology"] != "zk" else {}
            broker = words.get(state, str(state).lower() if state else "?")
        if n.get("zk_mode"):
            broker = f"zk {n['zk_mode']}"
        process = n["process"]
        style = "green" if process == "running" else "red"
        table.add_row(
            n["name"],
            "".join(ROLE_LETTERS[r] for r in n["roles"]),
            f"[{style}]{process}[/{style}]",
            _fmt(raft.get("state")),
            _fmt(raft.get("leader")),
            _fmt(raft.get("epoch")),
            _fmt(raft.get("high_watermark")),
            broker,
            _fmt(jmx.get("metadata_offset")),
            _fmt(jmx.get("active_controller_count")),
        )
    console.print(table)
    console.print(
        "[dim]roles: B broker, C controller, Z ZooKeeper; raft, leader, epoch and hw as "
        "each node itself reports them[/dim]"
    )
    if "quorum" in st:
        q = st["quorum"]
        if q["agreed"]:
            console.print(
                f"quorum: every controller sees leader {q['leader']} in epoch {q['epoch']}; "
                f"active controller: {', '.join(q['active_controllers']) or 'none'}"
            )
        else:
            console.print("[yellow]quorum: controllers disagree or did not answer[/yellow]")
    if st["topology"] == "migration":
        states = {
            n["name"]: (n.get("jmx") or {}).get("zk_migration_state")
            for n in st["nodes"]
            if "controller" in n["roles"]
        }
        console.print(
            "migration: ZkMigrationState "
            + ", ".join(f"{name} {state or '-'}" for name, state in states.items())
        )
    if "zookeeper" in st:
        zk = st["zookeeper"]
        console.print(
            f"zookeeper: /controller {zk.get('controller')}, /controller_epoch "
            f"{zk.get('controller_epoch')}, registered brokers {zk.get('broker_ids')}"
            + (f" [red]{zk['error']}[/red]" if zk.get("error") else "")
        )
