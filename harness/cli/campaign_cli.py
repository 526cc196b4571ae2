"""``kchaos campaign``: a matrix of runs for a night, with JUnit XML, resume and deflake."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from harness.campaign.report import FINAL
from harness.campaign.runner import (
    RECORD,
    Runner,
    campaign_dir,
    check_clusters,
    failed_cells,
    new_record,
    read_record,
    resumed_record,
)
from harness.campaign.runner import (
    keep_last as prune,
)
from harness.campaign.spec import expand, load_campaign, parse_overrides
from harness.console import console, say
from harness.spec import SpecError


@click.command("campaign")
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--results-dir",
    default="results",
    show_default=True,
    help="Campaigns go to RESULTS_DIR/<name>/<UTC timestamp>/.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a base run option for every cell (e.g. --set time_limit=20).",
)
@click.option(
    "--plan-only",
    is_flag=True,
    help="Expand and check every cell without a network, list them, and exit.",
)
@click.option(
    "--resume",
    "resume",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Finish an earlier campaign of this spec: its finished cells are skipped.",
)
@click.option(
    "--rerun-failed",
    "rerun",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Run again only the cells that did not end valid in an "
    "earlier campaign (its own spec; SPEC_FILE is not needed).",
)
@click.option(
    "--deflake",
    type=click.IntRange(0, 20),
    default=0,
    show_default=True,
    help="Rerun a failing cell up to N times with its own seed and record how often it reproduces.",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="Cells at once, each on its own cluster and subnet (1 on a 2-core box).",
)
@click.option(
    "--keep-last",
    type=click.IntRange(1),
    default=None,
    help="After the campaign, keep only the newest N campaigns of this name.",
)
@click.option(
    "--shrink-failures",
    "shrink_runs",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    metavar="MAX_RUNS",
    help="After the cells, `kchaos shrink` each invalid cell's run with at most MAX_RUNS runs "
    "(0: none); campaign.html links each shrink.html (docs/shrink.md).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (logs, CI).")  # fmt: skip
def campaign(
    spec_file: str | None,
    results_dir: str,
    overrides: tuple[str, ...],
    plan_only: bool,
    resume: str | None,
    rerun: str | None,
    deflake: int,
    parallel: int,
    keep_last: int | None,
    shrink_runs: int,
    no_progress: bool,
) -> None:
    """Runs every cell of a campaign spec's matrix (Jepsen's test-all), one after another.

    Writes campaign.json, junit.xml, summary.txt and campaign.html after every cell. Exit code:
    0 every cell valid, 1 any invalid, 2 any unknown, crashed or timed out, 130 interrupted
    (--resume finishes it), 254 a bad spec.
    """
    sets = parse_overrides(overrides)
    if rerun is not None:
        if spec_file is not None:
            raise SpecError(
                f"SPEC_FILE {spec_file} is not used with --rerun-failed (the campaign's own spec "
                "is): drop one"
            )
        if resume is not None:
            raise SpecError("--resume and --rerun-failed exclude each other: give one")
        wanted = set(failed_cells(Path(rerun)))  # a missing or torn record: one clear error
        earlier = read_record(Path(rerun), "--rerun-failed")
        spec = earlier.get("spec") or {}
        if not isinstance(spec, dict):
            raise SpecError(f"--rerun-failed {rerun}: {RECORD}'s spec is not a mapping")
        camp = expand(spec, where=f"{rerun}/{RECORD}", overrides=sets)
        camp = replace(camp, cells=[c for c in camp.cells if c.id in wanted])
        if not camp.cells:
            console.print(f"no failed cells in {rerun}: nothing to run", highlight=False)
            sys.exit(0)
        source = f"{rerun}/{RECORD}"
    elif spec_file is None:
        raise SpecError("kchaos campaign needs SPEC_FILE (or --rerun-failed DIR)")
    else:
        camp = load_campaign(spec_file, overrides=sets)
        source = spec_file
    if plan_only:
        if resume is not None:
            resumed_record(camp, Path(resume))  # refused as a run would refuse it
        for c in camp.cells:
            click.echo(f"{c.id}\t{c.label}\tseed {c.seed}\t{c.scenario}")
        click.echo(f"{len(camp.cells)} cells; each bounded to {camp.cell_timeout:.0f} s")
        return
    if resume is not None:
        directory = Path(resume)
        record = resumed_record(camp, directory)
        check_clusters(camp, parallel, directory)
    else:
        check_clusters(camp, parallel)  # before its folder is made
        directory = campaign_dir(Path(results_dir), camp.name)
        record = new_record(camp, source)
    say(f"campaign {camp.name}: {len(camp.cells)} cells; results in {directory}")
    code = _run(camp, directory, record, parallel, deflake, no_progress, shrink_runs)
    if keep_last is not None:
        prune(Path(results_dir), camp.name, keep_last, say)
    console.print(escape((directory / "summary.txt").read_text()), highlight=False, end="")
    console.print(f"campaign {directory}: exit code {code}", highlight=False)
    sys.exit(code)


def _run(
    camp: Any,
    directory: Path,
    record: dict,
    parallel: int,
    deflake: int,
    quiet: bool,
    shrink_runs: int = 0,
) -> int:
    todo = sum(c["status"] not in FINAL for c in record["cells"])
    if quiet or not console.is_terminal:
        return Runner(
            camp, directory, record, parallel, deflake, say=say, shrink_runs=shrink_runs
        ).run()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("cell {task.completed:.0f}/{task.total:.0f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    started = time.monotonic()
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(f"campaign {camp.name}", total=todo)

        def on_cell(outcome: dict) -> None:
            progress.advance(task)
            progress.console.print(
                f"  {outcome['status']}: {outcome.get('run_dir', '')} ({outcome['seconds']:.0f} s)",
                highlight=False,
            )

        def tell(message: str) -> None:
            progress.console.print(f"[dim]·[/dim] {escape(message)}", highlight=False)

        code = Runner(
            camp,
            directory,
            record,
            parallel,
            deflake,
            say=tell,
            on_cell=on_cell,
            shrink_runs=shrink_runs,
        ).run()
    say(f"campaign took {time.monotonic() - started:.0f} s")
    return code
