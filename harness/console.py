"""Terminal output shared by the commands: rich consoles and the progress ``say`` callback."""

from __future__ import annotations

import click
from rich.console import Console

from history import strict_json

console = Console()
err_console = Console(stderr=True)


def say(message: str) -> None:
    console.print(f"[dim]·[/dim] {message}", highlight=False)


def print_json(obj: object) -> None:
    click.echo(strict_json.dumps(obj, indent=2, sort_keys=True, default=str))
