"""``kchaos run`` and ``kchaos heal``: options or a spec file into a plan, and a plan into a run."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from rich.markup import escape

from clusters.handles import DEFAULT_NAME
from harness.cli.cluster_cli import NAME
from harness.cli.hosts import accept_option, hosts_option
from harness.console import console, err_console, say
from harness.plan import Plan, build_plan, load_plan, new_seed
from harness.spec import (
    OPTIONS,
    STEP_OPTIONS,
    WORKLOAD_OPTIONS,
    RunSpec,
    SpecError,
    load_spec_file,
    spec_from_dict,
)
from history.options import SAME, Option

_D = RunSpec()
F = TypeVar("F", bound=Callable[..., Any])


def _click_option(o: Option) -> Callable[[F], F]:
    """The command-line form of a declared option (history/options.py)."""
    # An option whose new runs get a `fresh` value has none here: with_fresh gives it once the
    # spec file and the other options are known (its help says it).
    default = o.default if o.fresh is SAME else None
    kw: dict[str, Any] = {"default": default, "help": o.help}
    if o.kind is bool:
        kw["is_flag"] = True
    elif o.kind is list:
        kw["default"] = ",".join(o.default)
    elif o.choices:
        kw["type"] = click.Choice(o.choices)
    elif o.kind in (int, float):
        kw["type"] = o.click_type()
    kw["show_default"] = default is not None and o.kind not in (bool, list)
    return click.option(f"--{o.flag}", **{**kw, **o.cli})


def run_options(f: F) -> F:
    """Every declared run option (the harness's and each workload kind's), in their order."""
    for o in reversed(OPTIONS):
        f = _click_option(o)(f)
    return f


# What a replay may change of the stored plan: where and how the run is kept, not what it does
# (README "Replaying a run"); every other run option, and --spec, is refused with --replay.
REPLAY_OVERRIDES = ("name", "cluster", "subnet", "results_dir", "keep_cluster")


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)


def _replayed(
    ctx: click.Context, replay_dir: Path, spec_file: Path | None, options: dict[str, Any]
) -> Plan:
    """The stored plan of ``replay_dir``, with the options a replay may change applied (and
    said); any other run option given is refused in one sentence."""
    refused = [
        f"--{o.flag}" for o in OPTIONS if o.name not in REPLAY_OVERRIDES and _given(ctx, o.name)
    ]
    if spec_file is not None:
        refused.insert(0, "--spec")
    if refused:
        allowed = ", ".join("--" + n.replace("_", "-") for n in REPLAY_OVERRIDES)
        raise SpecError(
            f"--replay runs the stored plan as it is: {', '.join(refused)} cannot be given "
            f"with it (only {allowed} may change where and how it is kept)"
        )
    plan = load_plan(replay_dir)
    changed = {n: options[n] for n in REPLAY_OVERRIDES if _given(ctx, n)}
    if changed:
        plan = replace(plan, spec={**plan.spec, **changed})
        plan.run_spec()  # the changed spec must still be valid (a name, a subnet, the hosts')
    said = "".join(f", {n.replace('_', '-')} {v}" for n, v in changed.items())
    say(f"replaying the plan of {replay_dir} (seed {plan.seed}{said})")
    return plan


# `kchaos run --help` by concern: the harness's options by name, every step family's under
# "Steps" and every workload kind's under "Workload"; anything not named here goes last, so
# nothing is left out of the help.
HELP_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Plan", ("spec_file", "replay_dir", "seed", "plan_only")),
    (
        "Cluster",
        (
            "topology",
            "zookeepers",
            "controllers",
            "version",
            "quorum",
            "timing",
            "disk_layer",
            "disk_writeback",
            "cluster",
            "subnet",
            "hosts",
        ),
    ),
    (
        "Workload",
        (
            "workload",
            "time_limit",
            "concurrency",
            "rate",
            "final_timeout",
            *(o.name for o in WORKLOAD_OPTIONS),
        ),
    ),
    (
        "Faults",
        (
            "nemesis",
            "nemesis_interval",
            "nemesis_quiet",
            "availability",
            "liveness",
            "recovery_bound",
            "must_reach",
        ),
    ),
    ("Steps", tuple(o.name for o in STEP_OPTIONS)),
    ("Output", ("name", "results_dir", "keep_cluster", "force")),
)


class GroupedCommand(click.Command):
    """A command whose --help lists its options in HELP_GROUPS' sections."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records: dict[str, tuple[str, str]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and param.name is not None:
                records[param.name] = record
        placed: set[str] = set()
        for title, names in (*HELP_GROUPS, ("Other", tuple(records))):
            rows = [records[n] for n in names if n in records and n not in placed]
            placed.update(names)
            if rows:
                with formatter.section(f"{title} options"):
                    formatter.write_dl(rows)


@click.command(cls=GroupedCommand)
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
    help="Run the plan of an earlier run directory again on a fresh cluster, as stored: only "
    "--name, --cluster, --subnet, --results-dir and --keep-cluster may be given with it.",
)
@run_options
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
    from harness.run.interpreter import Run

    if replay_dir is not None:
        plan = _replayed(ctx, replay_dir, spec_file, options)
    else:
        raw = load_spec_file(spec_file) if spec_file else {}
        data: dict[str, Any] = {str(k).replace("-", "_"): v for k, v in raw.items()}
        for o in OPTIONS:
            given = ctx.get_parameter_source(o.name) not in (ParameterSource.DEFAULT, None)
            if given or o.name not in data:
                data[o.name] = options[o.name]
        spec = spec_from_dict(data, where=str(spec_file) if spec_file else None, fresh=True)
        seed = spec.seed if spec.seed is not None else new_seed()
        plan = build_plan(spec, seed)
    if plan_only:
        click.echo(plan.to_json(), nl=False)
        # On stderr: stdout is the plan, byte for byte.
        for note in plan.notes:
            err_console.print(
                f"[yellow]note:[/yellow] {escape(note)}",
                highlight=False,
                emoji=False,
                soft_wrap=True,  # one line each, on a pipe too
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
        f"{ending}, check: {check.get('status', 'not checked')}"
        + (f", liveness: {check['liveness']}" if check.get("liveness") else ""),
        highlight=False,
    )
    sys.exit(result.exit_code)


@click.command()
@click.option(
    "--name",
    "cluster",
    type=NAME,
    default=DEFAULT_NAME,
    show_default=True,
    help="Docker cluster name.",
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
