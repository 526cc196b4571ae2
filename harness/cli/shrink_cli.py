"""``kchaos shrink RUN_DIR``: a failing run's plan made smaller while it still fails.

The search and its statistics: docs/shrink.md.

Exit code: 0 the search ended (at its minimum or its budget) with plan.min.json, 2 the original
did not fail again in its tries (nothing to shrink against), 130 interrupted (--resume goes on),
254 bad input.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from harness.cli.cluster_cli import NAME
from harness.console import console, say
from harness.exit_codes import INTERRUPTED_EXIT
from harness.plan import Plan, load_plan
from harness.run.rundir import new_dir
from harness.shrink.candidates import size
from harness.shrink.replay import ReplayRunner, failing_kinds, read_json, summaries
from harness.shrink.report import HTML, shrink_html
from harness.shrink.search import (
    MIN_PLAN,
    NOT_REPRODUCED,
    RECORD,
    Budget,
    Search,
    new_record,
    rate,
    read_record,
)
from harness.shrink.suspects import unit_scores
from harness.spec import SpecError
from history.format import PLAN_JSON

NOT_REPRODUCED_EXIT = 2


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)


def _original(run_dir: Path) -> tuple[Plan, dict[str, Any]]:
    """The failing run's plan and check, or SpecError in one sentence saying what it is not."""
    if not run_dir.is_dir():
        raise SpecError(f"{run_dir}: not a run directory (no such folder)")
    if not (run_dir / PLAN_JSON).is_file():
        raise SpecError(f"{run_dir}: not a run directory (no {PLAN_JSON})")
    plan = load_plan(run_dir)  # an unreadable plan: its own one sentence, naming the file
    results = read_json(run_dir / "results.json")
    if not results:
        raise SpecError(
            f"{run_dir}: no readable results.json, so no findings to shrink: check it first "
            f"(kchaos check {run_dir})"
        )
    if not failing_kinds(results):
        raise SpecError(
            f"{run_dir}: no failing finding to shrink (its check says {results.get('status')})"
        )
    return plan, results


@click.command("shrink")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    help="A failing kind a candidate must reproduce (repeatable; any one of them counts). "
    "Default: every failing kind of the run.",
)
@click.option(
    "--tries",
    type=click.IntRange(1, 100),
    default=3,
    show_default=True,
    help="Replays of the original (all of them: its rate) and at most this many of each "
    "candidate (it reproduces at its first failure).",
)
@click.option(
    "--max-runs",
    type=click.IntRange(1),
    default=60,
    show_default=True,
    help="Runs the search may make, the original's tries included (not --confirm's).",
)
@click.option(
    "--max-time",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds the search may take (across --resume); no new run starts after it.",
)
@click.option(
    "--confirm",
    type=click.IntRange(0, 100),
    default=3,
    show_default=True,
    help="Extra runs of the minimal plan at the end, all of them: its reproduction rate.",
)
@click.option(
    "--resume",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Continue an earlier shrink (its shrink-<stamp> folder): the runs it recorded are not "
    "run again.",
)
@click.option("--cluster", type=NAME, default=None, help="Docker cluster of the replays "
              "(default: the run's).")  # fmt: skip
@click.option("--subnet", default=None, help="Its Docker network (default: the run's).")
@click.option(
    "--lock",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="KCHAOS_LOCK",
    default=None,
    help="A file each replay holds an exclusive flock on for its run only (as `flock FILE "
    "kchaos run ...`), so that others sharing Docker run between the tries [env KCHAOS_LOCK].",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (logs, CI).")
@click.pass_context
def shrink(
    ctx: click.Context,
    run_dir: Path | None,
    kinds: tuple[str, ...],
    tries: int,
    max_runs: int,
    max_time: float | None,
    confirm: int,
    resume: Path | None,
    cluster: str | None,
    subnet: str | None,
    lock: Path | None,
    no_progress: bool,
) -> None:
    """Shrinks a failing run's plan to a smaller one that still fails the same way.

    Replays the original --tries times (its reproduction rate), then drops fault steps (delta
    debugging over start/stop pairs), step-family steps, time, clients, rate, fault durations
    and breadth, one candidate at a time, each replayed until it fails (at most --tries
    times). Every replay is a run directory under RUN_DIR's results/<name>/shrink-<stamp>/,
    with shrink.json, shrink.html and plan.min.json (`kchaos run --replay` runs it).
    """
    if resume is not None:
        try:
            record = read_record(resume)
        except ValueError as exc:
            raise SpecError(f"--resume {exc}") from None
        if run_dir is not None and Path(record["run_dir"]).resolve() != run_dir.resolve():
            raise SpecError(f"--resume {resume} shrinks {record['run_dir']}, not {run_dir}")
        if _given(ctx, "kinds") or _given(ctx, "tries"):
            raise SpecError(f"--resume {resume}: --kind and --tries are the shrink's own")
        for name, value in (("max_runs", max_runs), ("max_time", max_time), ("confirm", confirm)):
            if _given(ctx, name):
                record["max_time_s" if name == "max_time" else name] = value
        run_dir = Path(record["run_dir"])
        directory = resume
    elif run_dir is None:
        raise SpecError("kchaos shrink needs RUN_DIR (or --resume SHRINK_DIR)")
    original, results = _original(run_dir)
    failing = failing_kinds(results)
    if resume is None:
        unknown = sorted(set(kinds) - set(failing))
        if unknown:
            raise SpecError(
                f"--kind {', '.join(unknown)}: not a failing kind of {run_dir} "
                f"(its failing kinds: {', '.join(failing)})"
            )
        budget = Budget(tries, max_runs, max_time, confirm)
        record = new_record(str(run_dir), list(kinds) or failing, budget)
        # What the findings point at, read once: a resumed shrink orders as this one did.
        record["suspects"] = unit_scores(run_dir, original, record["kinds"])
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        directory = run_dir.parent / f"shrink-{stamp}"
    if original.spec.get("hosts"):
        # The inventory names the cluster and its addresses (docs/ssh.md).
        if cluster or subnet:
            raise SpecError(f"--cluster, --subnet: {run_dir} ran on the hosts of an inventory")
        record["cluster"] = record["subnet"] = None
    else:
        record["cluster"] = cluster or record.get("cluster") or original.spec.get("cluster")
        record["subnet"] = subnet or record.get("subnet") or original.spec.get("subnet")
    if resume is None:  # once nothing is left to refuse
        directory = new_dir(directory.parent, directory.name)
    runner = ReplayRunner(directory, record["cluster"], record["subnet"], lock=lock)
    found = summaries(results, limit=8)
    say(
        f"shrinking {run_dir} ({size(original)}) for {', '.join(record['kinds'])}: "
        f"results in {directory}"
    )

    def write_html(rec: dict[str, Any]) -> None:
        # plan.min.json is written before this is called: the page shows the smallest so far.
        best = _stored_best(directory, original)
        (directory / HTML).write_text(shrink_html(rec, original, best, found), encoding="utf-8")

    try:
        if no_progress or not console.is_terminal:
            status = Search(original, runner, record, directory, on_change=write_html).run()
        else:
            status = _with_progress(original, runner, record, directory, write_html)
    except KeyboardInterrupt:
        console.print(
            f"interrupted: the smallest plan so far is {directory / MIN_PLAN}; "
            f"kchaos shrink --resume {directory} goes on",
            highlight=False,
        )
        sys.exit(INTERRUPTED_EXIT)
    record = read_record(directory)
    write_html(record)
    _tell(record, directory, status)
    sys.exit(NOT_REPRODUCED_EXIT if status == NOT_REPRODUCED else 0)


def _stored_best(directory: Path, original: Plan) -> Plan:
    try:
        return load_plan(directory / MIN_PLAN)
    except SpecError:
        return original


def _with_progress(
    original: Plan, runner: ReplayRunner, record: dict[str, Any], directory: Path, html: Any
) -> str:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("run {task.completed:.0f}/{task.total:.0f}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("shrink", total=record["max_runs"], completed=record["runs"])

        def on_change(rec: dict[str, Any]) -> None:
            html(rec)
            best = rec["best"]
            entry = next((c for c in rec["candidates"] if c["id"] == best), rec["original"])
            s = entry["size"]
            what = f"{s['faults']} fault(s), {s['steps']} step(s), {s['time_limit']:g} s"
            progress.update(task, completed=rec["runs"], description=f"smallest {best}: {what}")

        search = Search(original, runner, record, directory, on_change=on_change)
        return search.run()


def _tell(record: dict[str, Any], directory: Path, status: str) -> None:
    kinds = set(record["kinds"])
    k, n = rate(record["original"]["runs"], kinds)
    lines = [f"original reproduced in {k} of {n} replays"]
    if status == NOT_REPRODUCED:
        lines.append(
            "nothing to shrink against: the failure did not come back (more --tries, or "
            "replay it as it is: kchaos run --replay RUN_DIR)"
        )
    else:
        best = load_plan(directory / MIN_PLAN)
        lines.append(f"smallest plan {record['best']}: {size(best)} ({directory / MIN_PLAN})")
        confirmed = record.get("confirmed")
        if confirmed and confirmed.get("of") == record["best"]:
            ck, cn = rate(confirmed["runs"], kinds)
            lines.append(f"it reproduced in {ck} of {cn} --confirm runs")
        if record.get("why"):
            lines.append(f"stopped early: {record['why']} (--resume {directory} with more)")
    lines.append(f"{record['runs']} runs; see {directory / HTML} and {directory / RECORD}")
    for line in lines:
        console.print(escape(line), highlight=False)
