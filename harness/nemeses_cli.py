"""``kchaos nemeses``: every fault package's menu, read from the packages themselves."""

from __future__ import annotations

import json
from typing import Any

import click

from nemesis.registry import catalog

KIND_WIDTH = 28
PARAM_WIDTH = 12


def _kind_lines(kind: dict[str, Any]) -> list[str]:
    lines = [f"    {kind['kind']:<{KIND_WIDTH}}{kind['meaning']}"]
    notes = []
    if kind["only_on"] is not None:
        notes.append(f"only on {', '.join(kind['only_on'])}")
    if kind["reads"]:
        notes.append(f"reads {', '.join(kind['reads'])}")
    notes += [f"plan: {param} {drawn}" for param, drawn in kind["plan_draws"].items()]
    lines += [f"    {'':<{KIND_WIDTH}}{note}" for note in notes]
    return lines


def _param_line(param: dict[str, Any]) -> str:
    default = "" if param["default"] is None else f"; default {param['default']:g}"
    return (
        f"    {param['name']:<{PARAM_WIDTH}}{param['meaning']}; accepts {param['accepts']}{default}"
    )


def render(data: dict[str, Any]) -> str:
    """The catalog as text: packages with their kinds and parameters, then the targets."""
    out: list[str] = []
    for package in data["packages"]:
        out.append(f"{package['fault']}: {package['meaning']}")
        out.append(f"  targets: {package['targets']}")
        out.append("  kinds:")
        for kind in package["kinds"]:
            out += _kind_lines(kind)
        if package["params"]:
            out.append("  params:")
            out += [_param_line(p) for p in package["params"]]
        out.append("")
    out.append("targets (resolved at fault time from what the nodes report):")
    for target in data["targets"]:
        reads = f"; reads {', '.join(target['reads'])}" if target["reads"] else ""
        out.append(f"  {target['target']:<{KIND_WIDTH - 2}}{target['meaning']}{reads}")
    for param in data["target_params"]:
        out.append(f"  param {param['name']}: {param['meaning']}")
    return "\n".join(out) + "\n"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the menus as JSON.")
def nemeses(as_json: bool) -> None:
    """Lists every fault package: its kinds, targets and parameters (range and meaning)."""
    data = catalog()
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(render(data), nl=False)
