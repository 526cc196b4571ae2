"""The ``kchaos`` command line: the command group (``main``, pyproject's ``kchaos`` entry point)
and, beside it, each command's module: ``run_cli`` (run, heal), ``cluster_cli``, ``hosts_cli``,
``nemeses_cli``, ``campaign_cli``, ``history_cli`` (a run's history as JSON Lines), and ``hosts``
(the ``--hosts`` options several commands share). ``kchaos check`` and ``kchaos analyze`` are
checkers/'s. A command parses its options and hands them to harness/'s other rooms (run/,
campaign/) and its root (spec, plan); nothing below imports this room.

Every failure a user can cause or fix ends as one line on stderr and exit code 254 (Jepsen's code
for bad arguments), so scripts can tell it from a verdict (0 valid, 1 invalid, 2 unknown); a run
whose cluster was removed under it ends the same way with 252, and one whose client host
crashed with 253 after healing and checking what it recorded (harness/exit_codes.py);
tracebacks are for kchaos's own bugs only.
"""

from __future__ import annotations

import os
import sys
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.markup import escape

from checkers.analyze.cli import analyze_command
from checkers.cli import check_command, data_log_command
from clusters.errors import ClusterError
from clusters.hold import ClusterRemoved
from clusters.kafka_dist import SETUP_VERSIONS
from harness.cli.campaign_cli import campaign
from harness.cli.cluster_cli import cluster
from harness.cli.history_cli import history_command
from harness.cli.hosts_cli import hosts
from harness.cli.nemeses_cli import nemeses
from harness.cli.run_cli import heal, run
from harness.cli.shrink_cli import shrink
from harness.console import console, err_console, say
from harness.exit_codes import (
    BAD_INPUT_EXIT,
    CLUSTER_REMOVED_EXIT,
    INTERRUPTED_EXIT,
    KCHAOS_FAILED_EXIT,
)
from harness.spec import SpecError, scenario_terms
from history.format import JSONL_NAME

# Exceptions whose message is the whole story for the user.
USER_ERRORS: tuple[type[Exception], ...] = (ClusterError, SpecError)


def _failed(exc: BaseException) -> NoReturn:
    """kchaos's own bug (an exception no command turns into a sentence): one line and exit 255
    (harness/exit_codes.py), never exit 1, which reads as an invalid verdict. KCHAOS_TRACEBACK=1
    prints the traceback too, for the bug report."""
    if os.environ.get("KCHAOS_TRACEBACK"):
        traceback.print_exception(exc)
    where = ""
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}"
    err_console.print(
        f"[bold red]kchaos failed:[/bold red] {escape(type(exc).__name__)}: "
        f"{escape(str(exc))}{escape(where)} (a kchaos bug, not a verdict; "
        "KCHAOS_TRACEBACK=1 shows the traceback)",
        highlight=False,
        emoji=False,
        soft_wrap=True,
    )
    sys.exit(KCHAOS_FAILED_EXIT)


def _usage_text(exc: click.UsageError) -> str:
    """A usage error's sentence; a bad value of an option starts with the option, as every
    other refusal does ("--time-limit: must be ...", harness/spec.py flagged), not with click's
    "Invalid value for '--time-limit':"."""
    param = getattr(exc, "param", None)
    if isinstance(exc, click.BadParameter) and isinstance(param, click.Option):
        longs = [o for o in param.opts if o.startswith("--")]
        return f"{(longs or param.opts)[0]}: {exc.message}"
    return exc.format_message()


class KchaosGroup(click.Group):
    """Turns user-facing errors into one clear message instead of a traceback, and any other
    exception into one line and exit 255."""

    def main(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("standalone_mode", None)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()  # a group without its command: its help
            sys.exit(BAD_INPUT_EXIT)
        except click.UsageError as exc:
            # One line naming the option, and where the accepted values are; click says 2 for a
            # usage error, which reads as an "unknown" verdict.
            help_hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            err_console.print(
                f"[bold red]error:[/bold red] {escape(_usage_text(exc))}{escape(help_hint)}",
                highlight=False,
                emoji=False,
                soft_wrap=True,
            )
            sys.exit(BAD_INPUT_EXIT)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            err_console.print("[yellow]aborted[/yellow]")
            sys.exit(INTERRUPTED_EXIT)
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/yellow]")
            sys.exit(INTERRUPTED_EXIT)
        except Exception as exc:
            _failed(exc)
        # Without standalone mode click returns --help's exit code instead of exiting.
        if isinstance(code, int) and code:
            sys.exit(code)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            # The message is plain text: "kill:one:" must not become an emoji, nor "[x]" markup.
            err_console.print(
                f"[bold red]error:[/bold red] {escape(str(exc))}",
                highlight=False,
                emoji=False,
                soft_wrap=True,
            )
            sys.exit(CLUSTER_REMOVED_EXIT if isinstance(exc, ClusterRemoved) else BAD_INPUT_EXIT)
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/yellow]")
            sys.exit(INTERRUPTED_EXIT)


def merging_first(command: click.Command) -> click.Command:
    """`kchaos check` as the checkers define it, but a run whose JVM-recorded ops never
    reached its history (the run was killed before its ending built them in) is finished first
    (history/build.py finish_run): the check then sees every op recorded, and says what a
    killed writer tore."""
    inner = command.callback
    assert inner is not None

    def callback(**kwargs: Any) -> Any:
        path = Path(kwargs["history"])
        merge_if_pending(path)
        if path.name == JSONL_NAME and not path.exists() and path.parent.is_dir():
            # Built into history.parquet, which the run directory holds now.
            kwargs["history"] = str(path.parent)
        return inner(**kwargs)

    return click.Command(
        command.name,
        callback=callback,
        params=command.params,
        help=command.help,
        short_help=command.short_help,
    )


def merge_if_pending(path: Path) -> None:
    from history.build import describe, finish_run, sides_pending
    from history.errors import HistoryError

    run_dir = path if path.is_dir() else path.parent
    if path.is_dir() or path.name == JSONL_NAME:
        pending = sides_pending(run_dir)
        try:
            # Also what a build or merge cut short left: cleaned up before anything reads it.
            done = finish_run(run_dir)
        except (HistoryError, OSError) as exc:
            if pending:
                err_console.print(
                    f"warning: JVM-recorded ops not made part of the history: {exc}",
                    highlight=False,
                )
            return
        if done is not None:
            say(describe(done))


def kchaos_version() -> str:
    """The installed distribution's version; a checkout run without installing it says so."""
    try:
        return metadata.version("kchaos")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: make setup)"


@click.group(cls=KchaosGroup)
@click.version_option(
    kchaos_version(),
    "--version",
    "-V",
    prog_name="kchaos",
    message="%(prog)s %(version)s",
    help="Print kchaos's version and exit (a command's --version is Kafka's).",
)
def main() -> None:
    """kchaos: Jepsen-style fault injection and checking for Apache Kafka."""


@main.command()
@click.option(
    "--version",
    "versions",
    multiple=True,
    default=list(SETUP_VERSIONS),
    show_default=True,
    help="Kafka versions (or lines such as 3.9) to fetch from Maven Central; repeatable.",
)
def setup(versions: tuple[str, ...]) -> None:
    """Installs and prepares everything: Debian packages, dockerd, Kafka jars, node image."""
    from clusters.setup import run_setup

    run_setup(list(versions), say=say)
    console.print("[green]setup complete[/green]")


main.add_command(cluster)
main.add_command(run)
main.add_command(campaign)
main.add_command(shrink)
main.add_command(heal)
main.add_command(hosts)
main.add_command(nemeses)
main.add_command(merging_first(check_command))
main.add_command(history_command)
main.add_command(data_log_command)
main.add_command(analyze_command(scenario_terms()))


if __name__ == "__main__":
    main()
