"""`kchaos check`: the click command the main CLI registers (harness/cli/__init__.py: add_command).

Exit codes: 0 valid, 1 anomalies found, 2 unknown (the history was read, and the checkers could
not tell), 254 bad input (no history there, or one that cannot be read: nothing is written),
255 the checker crashed.

check writes (results.json, summary.txt, report.html) only into a folder it recognises: a run
directory (one holding history.jsonl or history.parquet) or the folder of a history file named
explicitly, and only once that history was read. A stored verdict is never replaced because of
a typo or a file that is not a history.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from checkers.core.verdict import (
    BAD_INPUT_EXIT,
    CRASHED_EXIT,
    RESULTS_NAME,
    SUMMARY_NAME,
    Verdict,
)
from checkers.families.queue.dispatch import ENGINE_CHOICES
from checkers.scan.spark_session import MASTER_FORMS, master_problem
from history.errors import HistoryError
from history.format import JSONL_NAME, PARQUET_NAME

CRASH_NAME = "checker-crash.txt"
# checkers/report/render.py's REPORT_NAME (that module loads matplotlib: only when writing).
REPORT_NAME = "report.html"
# What check reads when named: kchaos's histories, and a Jepsen history.edn (converted beside it).
HISTORY_SUFFIXES = (".jsonl", ".parquet", ".edn")
# A run directory's own files beside its history (harness/run/): named, they are not a history.
RUN_FILES = ("run.json", "spec.json", "plan.json")
TAKES = (
    "kchaos check takes a run directory, its history.jsonl or history.parquet, or a Jepsen "
    "history .edn file named explicitly"
)


class NotAHistory(Exception):
    """The argument names no history check can read: bad input, and nothing is written."""


def _holds_history(d: Path) -> bool:
    return any((d / n).is_file() for n in (JSONL_NAME, PARQUET_NAME))


def _holds_runs(d: Path) -> bool:
    """Does the folder hold run directories (results/, results/<name>/, a campaign)?"""
    for pattern in ("*", "*/*", "*/*/*"):
        if any(_holds_history(sub) for sub in d.glob(pattern) if sub.is_dir()):
            return True
    return False


def out_dir(history: str) -> Path:
    """The folder check reads and writes: a run directory, or the folder of a history file named
    explicitly. NotAHistory, before anything is read or written, for anything else."""
    p = Path(history)
    if history in ("", "-"):
        raise NotAHistory(f"'{history}': not a history (standard input is not read): {TAKES}")
    if not p.exists():
        beside = p.parent
        hint = (
            f"; {beside} is a run directory: kchaos check {beside}"
            if (p.parent != p and _holds_history(beside))
            else ""
        )
        raise NotAHistory(f"{history}: no such history file or run directory{hint}")
    if p.is_dir():
        if _holds_history(p):
            return p
        edn = sorted(p.glob("*.edn"))
        if edn:
            raise NotAHistory(
                f"{history} holds {edn[0].name}, and no history.jsonl or history.parquet: an EDN "
                f"history is checked by name (kchaos check {edn[0]})"
            )
        if _holds_runs(p):
            raise NotAHistory(
                f"{history} holds runs: give one run directory, or use kchaos analyze {history}"
            )
        raise NotAHistory(f"{history}: no history.jsonl or history.parquet here: {TAKES}")
    if not p.is_file():
        raise NotAHistory(f"{history}: not a regular file, so not a history: {TAKES}")
    if p.suffix not in HISTORY_SUFFIXES:
        run = p.parent
        if (
            p.name in RUN_FILES
            or _holds_history(run)
            or any((run / n).is_file() for n in RUN_FILES)
        ):
            raise NotAHistory(
                f"{history} is a run's {p.name}, not a history: give the run directory "
                f"(kchaos check {run}); an EDN history is named explicitly"
            )
        raise NotAHistory(f"{history}: not a history: {TAKES}")
    return p.parent


def _wrote(verdict: Verdict) -> list[str]:
    unwritten = any(n.startswith(f"{REPORT_NAME} not written") for n in verdict.notes)
    return [RESULTS_NAME, SUMMARY_NAME, *([] if unwritten else [REPORT_NAME])]


@click.command("check")
@click.argument("history", type=click.Path())
@click.option("--spark-master", default=None,
              help=f"Where Spark runs the checks: {MASTER_FORMS}; default local[*]. The run "
              "must be readable at the same path by the executors (docs/spark.md).")  # fmt: skip
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

    Writes results.json, summary.txt and report.html beside the history, once it was read;
    anything that is not a history (a typo, a run's spec.json, an empty folder) is refused
    with exit code 254 and nothing written.
    """
    from checkers.api import check

    problem = master_problem(spark_master) if spark_master is not None else None
    if problem:
        click.echo(f"kchaos check: {problem}", err=True)
        sys.exit(BAD_INPUT_EXIT)
    try:
        out = out_dir(history)
    except NotAHistory as e:
        click.echo(f"kchaos check: {e}", err=True)
        sys.exit(BAD_INPUT_EXIT)
    try:
        verdict = check(history, spark_master, engine=engine)
    except HistoryError as e:
        # Unreadable: no verdict is taken, so none is written (a stored one stays as it was).
        click.echo(f"kchaos check: {e}", err=True)
        sys.exit(BAD_INPUT_EXIT)
    except Exception as e:  # the checker's own bug: say so in one line, keep the traceback
        (out / CRASH_NAME).write_text(traceback.format_exc())
        where = f" (traceback in {out / CRASH_NAME})"
        click.echo(f"kchaos check: checker crashed: {type(e).__name__}: {e}{where}", err=True)
        sys.exit(CRASHED_EXIT)
    click.echo(verdict.summary(), nl=False)
    click.echo(f"kchaos check: wrote {', '.join(_wrote(verdict))} in {out}", err=True)
    sys.exit(verdict.exit_code)


def _offsets(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    first, _, last = text.partition("..")
    try:
        return int(first), int(last or first)
    except ValueError:
        raise click.BadParameter(f"{text!r}: an offset (120) or a range (100..140)") from None


@click.command("data-log")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--broker", help="One broker's log (default: every broker's).")
@click.option("--partition", type=int, help="One partition of the queue topic.")
@click.option("--offsets", help="The batches holding an offset (120) or overlapping a range.")
def data_log_command(
    run_dir: str, broker: str | None, partition: int | None, offsets: str | None
) -> None:
    """Print a run's data logs (data/) as DumpLogSegments does: the batches a data-log finding
    cites, from the decoded rows the checks read (docs/history.md, "Files beside the history")."""
    from checkers.families.data_log.parse import DataLogError, read_data_logs
    from checkers.families.data_log.show import show

    wanted = _offsets(offsets)
    try:
        logs = read_data_logs(Path(run_dir) / "data")
    except DataLogError as e:
        click.echo(f"kchaos data-log: {e}", err=True)
        sys.exit(BAD_INPUT_EXIT)
    if not logs or (broker is not None and broker not in logs):
        have = ", ".join(logs) or "none"
        click.echo(f"kchaos data-log: {run_dir}/data holds no such log (brokers: {have})", err=True)
        sys.exit(BAD_INPUT_EXIT)
    for name, log in logs.items():
        if broker is None or name == broker:
            for line in show(log, partition, wanted):
                click.echo(line)


if __name__ == "__main__":
    check_command()
