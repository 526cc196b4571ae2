"""``kchaos run`` and ``kchaos heal``: options or a spec file into a plan, and a plan into a run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.markup import escape

from clusters.kafka_dist import DEFAULT_VERSION
from clusters.quorum import QUORUMS
from clusters.topology import DEFAULT_SUBNET, TOPOLOGIES
from harness.console import console, err_console, say
from harness.hosts import accept_option, hosts_option
from harness.plan import build_plan, load_plan, new_seed
from harness.spec import AVAILABILITY, SEND_MODES, RunSpec, load_spec_file, spec_from_dict
from nemesis.items import EXAMPLE, SYNTAX
from workloads.client_choice import CLIENTS, GROUP_PROTOCOLS, TXN_PROTOCOLS
from workloads.pipelined import SEND_RECORDERS
from workloads.queue_ops import FINAL_READ_RATE

# CLI option name -> spec field, for options that may also come from a spec file.
SPEC_OPTIONS = {
    "topology": "topology",
    "zookeepers": "zookeepers",
    "version": "version",
    "workload": "workload",
    "nemesis": "nemesis",
    "time_limit": "time_limit",
    "concurrency": "concurrency",
    "rate": "rate",
    "nemesis_interval": "nemesis_interval",
    "timing": "timing",
    "seed": "seed",
    "name": "name",
    "keep_cluster": "keep_cluster",
    "cluster": "cluster",
    "subnet": "subnet",
    "results_dir": "results_dir",
    "keys": "keys",
    "txn": "txn",
    "mode": "mode",
    "final_timeout": "final_timeout",
    "upgrade_to": "upgrade_to",
    "downgrade_to": "downgrade_to",
    "quorum": "quorum",
    "availability": "availability",
    "send_mode": "send_mode",
    "in_flight": "in_flight",
    "linger_ms": "linger_ms",
    "batch_size": "batch_size",
    "send_recorder": "send_recorder",
    "features": "features",
    "client": "client",
    "client_version": "client_version",
    "group_protocol": "group_protocol",
    "txn_protocol": "txn_protocol",
    "hosts": "hosts",
}

_D = RunSpec()


@click.command()
@click.option(
    "--spec",
    "spec_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A YAML or JSON file of these options; options given here override it.",
)
@click.option(
    "--replay",
    "replay_dir",
    type=click.Path(path_type=Path),
    help="Run the plan of an earlier run directory again on a fresh cluster.",
)
@click.option("--topology", type=click.Choice(TOPOLOGIES), default=_D.topology, show_default=True)
@click.option(
    "--zookeepers",
    type=click.IntRange(1, 3),
    default=_D.zookeepers,
    show_default=True,
    help="ZooKeeper nodes with --topology zk or migration (1 or 3).",
)
@click.option(
    "--version",
    default="3.9",
    show_default=True,
    help=f"Kafka version or line (newest of the line; e.g. {DEFAULT_VERSION}).",
)
@click.option("--workload", default=_D.workload, show_default=True)
@click.option(
    "--nemesis",
    default="",
    help=f"Faults, comma-separated: each item is {SYNTAX}. A package draws any of its kinds, "
    "a kind only itself, a target fixes whom it hits (kill and pause: the kind is the target). "
    "Every item gets a fault window before any gets a second; `kchaos nemeses` lists every "
    f"package, kind, target and parameter.\n\n\b\ne.g. partition,kill\n     {EXAMPLE}",
)
@click.option(
    "--time-limit",
    type=float,
    default=_D.time_limit,
    show_default=True,
    help="Seconds of workload.",
)
@click.option("--concurrency", type=int, default=_D.concurrency, show_default=True)
@click.option(
    "--rate",
    type=float,
    default=_D.rate,
    show_default=True,
    help="Operations per second, all clients together; 0: unlimited.",
)
@click.option(
    "--nemesis-interval",
    type=float,
    default=_D.nemesis_interval,
    show_default=True,
    help="Seconds a fault stays on, and then off.",
)
@click.option(
    "--timing", type=click.Choice(["fast", "default"]), default=_D.timing, show_default=True
)
@click.option("--seed", type=int, default=None, help="Fixes every random choice (default: random).")
@click.option("--name", default=None, help="results/<name>/ (default: the workload).")
@click.option("--keep-cluster", is_flag=True, help="Leave the cluster up after the run.")
@click.option("--cluster", default=_D.cluster, show_default=True, help="Docker cluster name.")
@click.option("--subnet", default=DEFAULT_SUBNET, show_default=True)
@click.option("--results-dir", default=_D.results_dir, show_default=True)
@click.option("--keys", type=int, default=_D.keys, show_default=True, help="Queue keys.")
@click.option("--txn", is_flag=True, help="Queue writes in Kafka transactions.")
@click.option(
    "--mode", type=click.Choice(["assign", "subscribe"]), default=_D.mode, show_default=True
)
@click.option(
    "--final-timeout",
    type=float,
    default=_D.final_timeout,
    show_default=True,
    help="Bound on the final reads, seconds; a queue run adds a second per "
    f"{FINAL_READ_RATE:,.0f} acknowledged sends.",
)
@click.option(
    "--upgrade-to",
    default=None,
    help="Roll every node to this Kafka release during the run, then finalize its feature "
    "levels (docs/upgrades.md).",
)
@click.option(
    "--downgrade-to",
    default=None,
    help="Lower metadata.version safely to this older release's, then roll every node back to "
    "it (after --upgrade-to, if given).",
)
@click.option(
    "--quorum",
    type=click.Choice(QUORUMS),
    default=None,
    help="The controller quorum: static (controller.quorum.voters, the default), dynamic "
    "(KIP-853, Kafka 3.9+: a controller is removed and added back during the run), or "
    "static-to-dynamic (Kafka 4.1+: kraft.version raised to 1 first; docs/upgrades.md).",
)
@click.option(
    "--availability",
    type=click.Choice(AVAILABILITY),
    default=None,
    help="What a spurious fence of a healthy broker does to the verdict: report it, tolerated "
    "(the default), or fail the run (docs/checkers.md, lease liveness).",
)
@click.option(
    "--send-mode",
    type=click.Choice(SEND_MODES),
    default=None,
    help="Queue sends one at a time per process (sync, the default), or pipelined: each "
    "worker slot one idempotent producer with --in-flight sends outstanding, each its own "
    "operation (async; docs/clients.md).",
)
@click.option(
    "--in-flight",
    type=int,
    default=None,
    help="With --send-mode async: sends outstanding per producer, one process id each (default 5).",
)
@click.option(
    "--linger-ms",
    type=float,
    default=None,
    help="With --send-mode async: the producer's linger.ms (default 5).",
)
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="With --send-mode async: the producer's batch.size in bytes (librdkafka's default).",
)
@click.option(
    "--send-recorder",
    type=click.Choice(SEND_RECORDERS),
    default=None,
    help="With --client java --send-mode async: who writes each send's operations, the "
    "producer's JVM (jvm, the default: tens of thousands of sends a second) or the harness "
    "(each send through its recorder, as librdkafka's are; docs/history.md).",
)
@click.option(
    "--features",
    default=None,
    help="Feature steps of your own, in order, each one kafka-features request during the run "
    "(after any roll): name=level (upgrade or downgrade, whichever the finalized level calls "
    "for), name=level!unsafe, dry-run:name=level, metadata.version=release:X; comma-separated "
    "(docs/upgrades.md, Feature steps).",
)
@click.option(
    "--client",
    type=click.Choice(CLIENTS),
    default=None,
    help="The Kafka client the queue drives: librdkafka (confluent-kafka, the default) or "
    "java (Kafka's own client, from the Maven jars; docs/clients.md).",
)
@click.option(
    "--client-version",
    default=None,
    help="With --client java: the Kafka release whose client jars to use (default: the "
    "release the run starts on).",
)
@click.option(
    "--group-protocol",
    type=click.Choice(GROUP_PROTOCOLS),
    default=None,
    help="With --mode subscribe: the consumer group protocol, classic (the default) or "
    "consumer (KIP-848, Kafka 4.0+).",
)
@click.option(
    "--txn-protocol",
    type=click.Choice(TXN_PROTOCOLS),
    default=None,
    help="With --txn on Kafka 4.0+: the transaction protocol the cluster is formatted with, "
    "classic (transaction.version 0) or v2 (KIP-890 part 2, --client java only); default: "
    "the release's own default.",
)
@click.option(
    "--hosts",
    default=None,
    help="Run on the hosts of this SSH inventory instead of Docker (docs/ssh.md): the cluster "
    "takes their name and topology.",
)
@click.option(
    "--plan-only",
    is_flag=True,
    help="Print the plan and exit without running. Checks all a run checks without a network "
    "(the spec, the nemesis items on the topology, the Kafka versions' spelling and range); "
    "which release a line such as 3.9 means, and that Maven Central has it, the run finds out.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Run even if another run (or command) holds --cluster; refused otherwise "
    "(docs/clusters.md, the hold).",
)
@click.pass_context
def run(
    ctx: click.Context,
    spec_file: Path | None,
    replay_dir: Path | None,
    plan_only: bool,
    force: bool,
    **options: Any,
) -> None:
    """Runs a workload against a fresh cluster while nemeses break it; records a history."""
    from harness.interpreter import Run

    if replay_dir is not None:
        plan = load_plan(replay_dir)
        say(f"replaying the plan of {replay_dir} (seed {plan.seed})")
    else:
        raw = load_spec_file(spec_file) if spec_file else {}
        data: dict[str, Any] = {str(k).replace("-", "_"): v for k, v in raw.items()}
        for opt, field_name in SPEC_OPTIONS.items():
            given = ctx.get_parameter_source(opt) not in (ParameterSource.DEFAULT, None)
            if given or field_name not in data:
                data[field_name] = options[opt]
        spec = spec_from_dict(data, where=str(spec_file) if spec_file else "options")
        seed = spec.seed if spec.seed is not None else new_seed()
        plan = build_plan(spec, seed)
    if plan_only:
        click.echo(plan.to_json(), nl=False)
        # On stderr: stdout is the plan, byte for byte.
        for note in plan.notes:
            err_console.print(
                f"[yellow]note:[/yellow] {escape(note)}", highlight=False, emoji=False
            )
        return
    for note in plan.notes:
        say(escape(note))
    run = Run(plan, say=say, replay_of=str(replay_dir) if replay_dir else None, force=force)
    result = run.execute()
    check = result.summary.get("check") or {}
    kind = run.workload_kind
    ending = kind.final_sentence(result.summary.get(kind.FINAL_KEY) or {})
    if "crashed" in result.summary and kind.FINAL_KEY not in result.summary:
        ending = (
            f"no final reads (the client host crashed during {result.summary['crashed']['where']})"
        )
    console.print(
        f"run {result.run_dir}: seed {result.seed}, ops {result.summary.get('ops', {})}, "
        f"{ending}, check: {check.get('status', 'not checked')}",
        highlight=False,
    )
    sys.exit(result.exit_code)


@click.command()
@click.option(
    "--name", "cluster", default=_D.cluster, show_default=True, help="Docker cluster name."
)
@click.option(
    "--force",
    is_flag=True,
    help="Heal even while a run holds the cluster (it heals itself as it ends; undoing its "
    "faults early makes its history say faults were on that were not).",
)
@hosts_option
@accept_option
@click.pass_context
def heal(
    ctx: click.Context,
    cluster: str,
    force: bool,
    hosts: Path | None,
    accept_new_host_keys: bool,
) -> None:
    """Undoes every fault any nemesis could have left on a cluster (after a crashed run).

    With --hosts, on the inventory's hosts: every kchaos iptables chain and netem qdisc,
    stopped and exited JVMs, libfaketime, Byteman rules; a host's network rules outlive its
    JVM, so hosts whose JVM is down are cleaned too."""
    from clusters.handles import open_cluster
    from clusters.hold import holding
    from nemesis.heal import heal_cluster

    if hosts is not None:
        if ctx.get_parameter_source("cluster") not in (ParameterSource.DEFAULT, None):
            raise click.UsageError("--name: with --hosts the inventory names the cluster")
    elif accept_new_host_keys:
        raise click.UsageError("--accept-new-host-keys goes with --hosts")
    target = open_cluster(cluster, hosts, accept_new_host_keys=accept_new_host_keys, say=say)
    cluster = target.cluster
    does = "heal it anyway (the run's history then shows faults on that were already undone)"
    with holding(cluster, "kchaos heal", force, does, say):
        done = heal_cluster(target)
    for action in done:
        say(action)
    what = f"{len(done)} fault(s) undone" if done else "no fault was in place"
    console.print(f"[green]cluster '{cluster}' healed: {what}[/green]", highlight=False)
