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

# harness/exit_codes.py BAD_INPUT_EXIT (checkers/ cannot import harness/): the job is
# misconfigured (here: pointed at a folder without runs), not a verdict about Kafka.
BAD_INPUT_EXIT = 254


def analyze_command(terms: ScenarioTerms) -> click.Command:
    """The `kchaos analyze` command, naming scenarios with ``terms``."""

    @click.command("analyze")
    @click.argument("directory", type=click.Path(exists=True, file_okay=False))
    @click.option("--spark-master", default=None,
                  help="local[*] (default), spark://, yarn, k8s://, or sc://HOST:PORT for Spark "
                  "Connect; DIRECTORY must be readable at the same path by the executors "
                  "(docs/spark.md).")  # fmt: skip
    @click.option("--out", type=click.Path(dir_okay=False), default=None,
                  help="Where to write the HTML (default: DIRECTORY/analysis.html).")  # fmt: skip
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
