"""``kchaos history``: a run's history as JSON Lines, for people (docs/history.md).

A run whose JVM recorded its ops keeps its history as history.parquet alone (history/build.py);
this writes the history.jsonl such a run would have had, derived from it (history/export.py).
A run that has a history.jsonl gets it as it is. A run whose JVM-recorded ops were never built
into its history (killed before its ending) is built first, as `kchaos check` does.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import IO

import click
from rich.markup import escape

from harness.console import err_console
from harness.exit_codes import BAD_INPUT_EXIT
from history.errors import HistoryError
from history.format import JSONL_NAME, PARQUET_NAME


@click.command("history")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write it to this file (default: standard output).",
)
def history_command(run_dir: Path, output: Path | None) -> None:
    """Write RUN_DIR's history as JSON Lines: its history.jsonl, or the one derived from its
    history.parquet."""
    from harness.cli import merge_if_pending  # the package's own: imported when run

    try:
        if not run_dir.is_dir():
            raise HistoryError(run_dir, None, "no such run directory")
        merge_if_pending(run_dir)
        if output is None:
            _write(run_dir, sys.stdout.buffer)
        else:
            with output.open("wb") as out:
                _write(run_dir, out)
    except HistoryError as exc:
        err_console.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        sys.exit(BAD_INPUT_EXIT)
    except BrokenPipeError:  # `kchaos history RUN | head`
        sys.stderr.close()


def _write(run_dir: Path, out: IO[bytes]) -> None:
    jsonl, parquet = run_dir / JSONL_NAME, run_dir / PARQUET_NAME
    if jsonl.exists():
        with jsonl.open("rb") as f:
            shutil.copyfileobj(f, out)
        return
    if not parquet.exists():
        raise HistoryError(run_dir, None, f"no {JSONL_NAME} or {PARQUET_NAME} here")
    from history.export import write_jsonl

    write_jsonl(parquet, out)
