"""The ``kchaos`` command line.

Every failure a user can cause or fix ends as one line on stderr and a non-zero exit; tracebacks
are for kchaos's own bugs only.
"""

from __future__ import annotations

import sys

import click

from checkers.analyze.cli import analyze_command
from checkers.cli import check_command
from clusters.errors import ClusterError
from harness.cluster_cli import cluster
from harness.console import console, err_console, say
from harness.run_cli import heal, run
from harness.spec import SpecError

# Exceptions whose message is the whole story for the user.
USER_ERRORS: tuple[type[Exception], ...] = (ClusterError, SpecError)


class KchaosGroup(click.Group):
    """Turns user-facing errors into one clear message instead of a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            err_console.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
            sys.exit(2)
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/yellow]")
            sys.exit(130)


@click.group(cls=KchaosGroup)
def main() -> None:
    """kchaos: Jepsen-style fault injection and checking for Apache Kafka."""


@main.command()
@click.option(
    "--version",
    "versions",
    multiple=True,
    default=["3.9"],
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
main.add_command(heal)
main.add_command(check_command)
main.add_command(analyze_command)


if __name__ == "__main__":
    main()
