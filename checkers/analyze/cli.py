"""`kchaos analyze`: the click command harness/cli/__init__.py builds
(``analyze_command(terms)``) and registers, given the scenario terms of the run options'
declarations (checkers/ cannot read them: checkers/analyze/scenario.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from checkers.analyze.report import ANALYSIS_NAME, DEFAULT_LAST, PARQUET_DIR
from checkers.analyze.scenario import ScenarioTerms
from checkers.core.verdict import BAD_INPUT_EXIT
from checkers.scan.spark_session import MASTER_FORMS, master_problem

# What analysis.html starts with (checkers/analyze/report.py's template): how --out tells a page
# it may replace from a file it must not.
_OURS = "<title>kchaos analysis: "
# A run directory's own files: --out never writes into one (analysis/ would land among them).
_RUN_FILES = ("run.json", "spec.json", "plan.json", "history.jsonl", "history.parquet")


def out_problem(out: str) -> str | None:
    """Why --out must not be written (None: it may): it could overwrite what kchaos analyze did
    not write. It must end in .html, be absent or an earlier analysis page, and not be in a run
    directory (a run's report.html is its own, and analysis/ would land among its evidence)."""
    p = Path(out)
    if p.suffix != ".html":
        return f"--out {out}: the page is HTML: give a path ending in .html"
    folder = p.parent
    if any((folder / n).is_file() for n in _RUN_FILES):
        return f"--out {out}: {folder} is a run directory; write the analysis beside it, not in it"
    if p.is_symlink() or (p.exists() and not p.is_file()):
        return f"--out {out}: not a plain file; choose another path"
    if p.exists():
        try:
            with p.open(encoding="utf-8", errors="replace") as f:
                head = f.read(4096)
        except OSError as exc:
            return f"--out {out}: cannot be read ({exc.strerror}); choose another path"
        if _OURS not in head:
            return f"--out {out} exists and is not a page kchaos analyze wrote: choose another path"
    return None


def analyze_command(terms: ScenarioTerms) -> click.Command:
    """The `kchaos analyze` command, naming scenarios with ``terms``."""

    @click.command("analyze")
    @click.argument("directory", type=click.Path(exists=True, file_okay=False))
    @click.option("--spark-master", default=None,
                  help=f"Where Spark runs the analysis: {MASTER_FORMS}; default local[*]. "
                  "DIRECTORY must be readable at the same path by the executors "
                  "(docs/spark.md).")  # fmt: skip
    @click.option("--out", type=click.Path(dir_okay=False), default=None,
                  help="Where to write the HTML (default: DIRECTORY/analysis.html): a path ending "
                  "in .html, new or an earlier analysis page, not in a run directory; the tables "
                  "go to analysis/ beside it.")  # fmt: skip
    @click.option("--last", type=click.IntRange(min=1), default=DEFAULT_LAST, show_default=True,
                  help="Pass rate over each scenario's last N runs.")  # fmt: skip
    def command(directory: str, spark_master: str | None, out: str | None, last: int) -> None:
        """Trends across nights: DIRECTORY holds campaigns (results/<campaign>/<timestamp>/ with
        campaign.json), plain run directories, or both.

        Reads every run's run.json, spec.json, results.json and history.parquet (run `kchaos check`
        first for unchecked runs; they are shown as "not checked") and writes analysis.html with
        each scenario's verdict per night, pass rate over the last N runs, flaky scenarios, the
        first failing Kafka version, finding kinds over time, runs by workload, faults and Kafka
        version that ran, and the worst runs linked to their report.html; the tables also as
        Parquet in analysis/ beside it. Spark's own log goes to analysis/spark.log.
        """
        from rich.console import Console

        from checkers.analyze.report import analyze
        from checkers.analyze.runs import find_runs
        from checkers.scan.spark_session import spark_session

        problem = master_problem(spark_master) if spark_master is not None else None
        problem = problem or (out_problem(out) if out is not None else None)
        if problem:
            click.echo(problem, err=True)
            sys.exit(BAD_INPUT_EXIT)
        console = Console(stderr=True, highlight=False)
        started = time.monotonic()
        runs = find_runs(directory, terms)
        if not runs:
            click.echo(
                f"no runs under {directory} (a run directory holds run.json, or spec.json and a "
                "history); nothing to analyze",
                err=True,
            )
            sys.exit(BAD_INPUT_EXIT)
        out_path = Path(out) if out else Path(directory) / ANALYSIS_NAME
        log = out_path.parent / PARQUET_DIR / "spark.log"
        console.print(f"analyze: {len(runs)} runs under {directory}")
        with console.status("starting Spark (local)" if not spark_master else "starting Spark"):
            spark = spark_session(spark_master, log_path=log, app_name="kchaos-analyze")
        console.print(f"  Spark started ({time.monotonic() - started:.1f} s; its log: {log})")
        try:
            with console.status("analyzing") as status:

                def step(text: str) -> None:
                    status.update(text)
                    console.print(f"  {text} ({time.monotonic() - started:.1f} s)")

                path = analyze(directory, spark, out, last=last, progress=step, runs=runs)
        finally:
            spark.stop()
        click.echo(f"wrote {path} and {path.parent / PARQUET_DIR}/*.parquet "
                   f"({time.monotonic() - started:.1f} s)")  # fmt: skip
        sys.exit(0)

    return command
