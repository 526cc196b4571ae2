"""`kchaos analyze`: the click command for harness/cli.py to register (add_command)."""

from __future__ import annotations

import sys

import click


@click.command("analyze")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--spark-master", default=None, help="Spark master URL (default: local[*]).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Where to write the HTML (default: DIRECTORY/analysis.html).")  # fmt: skip
def analyze_command(directory: str, spark_master: str | None, out: str | None) -> None:
    """Check many runs together: DIRECTORY holds run directories (e.g. a night's results/).

    Reads every run's history.parquet, results.json and spec.json (run `kchaos check` first for
    unchecked runs) and writes a cross-run report: anomalies by workload, nemesis and Kafka
    version, trends over dates, and the worst runs linked to their report.html.
    """
    from checkers.analyze.report import analyze
    from checkers.spark_session import spark_session

    spark = spark_session(spark_master)
    try:
        path = analyze(directory, spark, out)
    finally:
        spark.stop()
    click.echo(f"wrote {path}")
    sys.exit(0)


if __name__ == "__main__":
    analyze_command()
