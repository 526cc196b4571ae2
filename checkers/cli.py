"""`kchaos check`: the click command the main CLI registers (harness/cli/__init__.py: add_command).

Exit codes: 0 valid, 1 anomalies found, 2 unknown (not enough information, or a history that
cannot be read), 255 the checker crashed.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from checkers.core.verdict import CRASHED_EXIT, UNKNOWN, Verdict
from checkers.families.queue.dispatch import ENGINE_CHOICES
from history.errors import HistoryError

CRASH_NAME = "checker-crash.txt"


def _out_dir(path: str) -> Path:
    p = Path(path)
    return p if p.is_dir() else p.parent


@click.command("check")
@click.argument("history", type=click.Path())
@click.option("--spark-master", default=None,
              help="local[*] (default), spark://, yarn, k8s://, or sc://HOST:PORT for Spark "
              "Connect; the run must be readable at the same path by the executors "
              "(docs/spark.md).")  # fmt: skip
@click.option(
    "--engine",
    type=click.Choice(ENGINE_CHOICES),
    default="auto",
    show_default=True,
    help="auto: Spark when --spark-master is given, else local (vectorised, this process; "
    "pandas is its old name). reference: the slow per-key Python path.",
)
def check_command(history: str, spark_master: str | None, engine: str) -> None:
    """Re-check a stored run: HISTORY is a run directory or a history file.

    Writes results.json and summary.txt beside the history.
    """
    from checkers.api import check

    try:
        verdict = check(history, spark_master, engine=engine)
    except HistoryError as e:
        click.echo(f"kchaos check: {e}", err=True)
        out = _out_dir(history)
        if out.is_dir():
            Verdict(status=UNKNOWN, notes=[f"history unreadable: {e}"], history=history).write(out)
        sys.exit(2)
    except Exception as e:  # the checker's own bug: say so in one line, keep the traceback
        out = _out_dir(history)
        where = ""
        if out.is_dir():
            (out / CRASH_NAME).write_text(traceback.format_exc())
            where = f" (traceback in {out / CRASH_NAME})"
        click.echo(f"kchaos check: checker crashed: {type(e).__name__}: {e}{where}", err=True)
        sys.exit(CRASHED_EXIT)
    click.echo(verdict.summary(), nl=False)
    sys.exit(verdict.exit_code)


if __name__ == "__main__":
    check_command()
