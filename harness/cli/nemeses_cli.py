"""``kchaos nemeses``: every fault package's menu, read from the packages themselves, and what
``--nemesis`` may name of each (nemesis/items.py)."""

from __future__ import annotations

from typing import Any

import click

from clusters.topology import TOPOLOGIES
from history import strict_json
from nemesis.api import TARGETS
from nemesis.choreo import CHOREO
from nemesis.items import EXAMPLE, SYNTAX, aimed_on, targets_on
from nemesis.registry import MENUS, catalog

KIND_WIDTH = 28
PARAM_WIDTH = 12

FORMS = {
    "package": "any of the package's kinds, drawn as the plan draws them",
    "package:kind": "that kind only",
    "package:kind@target": "that kind, every time at that target",
    "package@target": "the package's kinds that take a target, every time at that target "
    "(kill and pause: the kind is the target, kill@active-controller is "
    "kill:active-controller)",
}


def _package_items(package: dict[str, Any]) -> list[str]:
    name = package["fault"]
    if MENUS[name].kind_is_target:
        return [name, f"{name}:<kind>", f"{name}@<kind>"]
    aimed = package["target_kinds"]
    if not aimed:
        return [name, f"{name}:<kind>"]
    return [name, f"{name}:<kind>", f"{name}:<kind>@<target>", f"{name}@<target>"]


def _with_items(data: dict[str, Any]) -> dict[str, Any]:
    """The catalog, and for each package, kind and target what a spec may name of it."""
    data["items"] = {"syntax": SYNTAX, "forms": FORMS, "example": EXAMPLE}
    for package in data["packages"]:
        package["items"] = _package_items(package)
        for kind in package["kinds"]:
            if (
                kind["kind"] in package["target_kinds"]
                and not MENUS[package["fault"]].kind_is_target
            ):
                kind["targets_on"] = {
                    t: targets_on(package["fault"], kind["kind"], t) for t in TOPOLOGIES
                }
    for target in data["targets"]:
        target["only_on"] = aimed_on(target["target"])
    return data


def _target_note(kind: dict[str, Any]) -> str | None:
    """The targets a kind takes: any the topology has, or fewer (jvm: the nodes it hooks)."""
    on = kind.get("targets_on")
    if on is None:
        return None
    notes = []
    for target in TARGETS:
        offered = [t for t in on if t in aimed_on(target) and (on[t] or t in _kind_on(kind))]
        where = [t for t in offered if target in on[t]]
        if not where:
            notes.append(f"not {target}")
        elif where != offered:
            notes.append(f"{target} only on {', '.join(where)}")
    return "@target: " + ("; ".join(notes) if notes else "any target (below)")


def _kind_on(kind: dict[str, Any]) -> list[str]:
    return kind["only_on"] or list(TOPOLOGIES)


def _kind_lines(kind: dict[str, Any]) -> list[str]:
    lines = [f"    {kind['kind']:<{KIND_WIDTH}}{kind['meaning']}"]
    notes = []
    if kind["only_on"] is not None:
        notes.append(f"only on {', '.join(kind['only_on'])}")
    if kind["reads"]:
        notes.append(f"reads {', '.join(kind['reads'])}")
    if kind.get("drawn") is False:
        notes.append("only where a spec names it: a bare package never draws it")
    notes += [f"plan: {param} {drawn}" for param, drawn in kind["plan_draws"].items()]
    target = _target_note(kind)
    if target:
        notes.append(target)
    lines += [f"    {'':<{KIND_WIDTH}}{note}" for note in notes]
    return lines


def _param_line(param: dict[str, Any]) -> str:
    default = "" if param["default"] is None else f"; default {param['default']:g}"
    return (
        f"    {param['name']:<{PARAM_WIDTH}}{param['meaning']}; accepts {param['accepts']}{default}"
    )


def _items_lines(data: dict[str, Any]) -> list[str]:
    items = data["items"]
    out = ["--nemesis items (comma-separated; a spec file's nemesis: the same, or a list):"]
    out += [f"  {form:<{KIND_WIDTH - 2}}{meaning}" for form, meaning in items["forms"].items()]
    out.append(f"  e.g. --nemesis {items['example']}")
    out.append("  Every item gets a fault window before any gets a second.")
    return [*out, ""]


def _named(package: dict[str, Any]) -> str:
    aimed = package["target_kinds"]
    if MENUS[package["fault"]].kind_is_target:
        takes = "the kind is the target"
    elif aimed:
        takes = f"@target for {', '.join(aimed)}"
    else:
        takes = "no kind takes a target"
    return f"  items: {', '.join(package['items'])} ({takes})"


def render(data: dict[str, Any]) -> str:
    """The catalog as text: the item syntax, packages with their kinds and parameters, then the
    targets."""
    out = _items_lines(data)
    for package in data["packages"]:
        out.append(f"{package['fault']}: {package['meaning']}")
        out.append(f"  targets: {package['targets']}")
        out.append(_named(package))
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
        only = target["only_on"]
        where = "" if len(only) == len(TOPOLOGIES) else f"; only on {', '.join(only)}"
        out.append(f"  {target['target']:<{KIND_WIDTH - 2}}{target['meaning']}{reads}{where}")
    for param in data["target_params"]:
        out.append(f"  param {param['name']}: {param['meaning']}")
    out += _choreography_lines(data["choreographies"])
    return "\n".join(out) + "\n"


def _choreography_lines(choreographies: list[dict[str, Any]]) -> list[str]:
    """Each choreography: what it does, and its moves by phase, as the plan draws them."""
    out = [
        "",
        f"{CHOREO}: sequences of the packages' steps on roles drawn with the seed (the "
        "minority, the node that loses power, the rest of the brokers); one a fault window, "
        "ended within it",
        f"  items: {CHOREO}, {CHOREO}:<name> (no target: the roles are drawn)",
    ]
    for c in choreographies:
        out.append(f"    {c['choreography']:<{KIND_WIDTH}}{c['meaning']}")
        moves = "; ".join(f"{m['phase']}: {m['step']} {m['role']}" for m in c["moves"])
        out.append(f"    {'':<{KIND_WIDTH}}{moves}")
    return out


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the menus as JSON.")
def nemeses(as_json: bool) -> None:
    """Lists every fault package: its kinds, targets and parameters (range and meaning), and
    how --nemesis names them (package, package:kind, package:kind@target, package@target)."""
    data = _with_items(catalog())
    if as_json:
        click.echo(strict_json.dumps(data, indent=2))
    else:
        click.echo(render(data), nl=False)
