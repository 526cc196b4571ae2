"""Packet faults: delay, duplication and reordering with tc netem; loss with iptables.

netem shapes what a node sends, to everyone (other nodes and the host's clients alike): one root
qdisc per node on eth0, replaced on each start so faults do not stack. Not every kernel has
netem (CONFIG_NET_SCH_NETEM); where it is missing those kinds fail with that said plainly.
Loss needs no netem: an iptables ``statistic`` match drops a share of the packets arriving from
other nodes, in a chain of its own, so the host's observers keep a clean path as with partitions.

The device is the node's own (``Layout.interface``: a container's eth0, a host's from its
inventory), and stop clears every node that may hold a qdisc or chain: the running ones, and
every host, whose network outlives its JVM (nemesis/partition.py says why that matters).
"""

from __future__ import annotations

import random
from typing import Any

from clusters.capabilities import Exec, layout_of
from history.effects import DEGRADED, EFFECTS, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, NotApplied, before_touching
from nemesis.iptables import install_chain, remove_chain
from nemesis.menu import Kind, Menu, Param, Pick
from nemesis.nodes import number, on_each, run, split_running
from nemesis.partition import holding_rules
from nemesis.targets import resolve

DEV = "eth0"
CHAIN = "KCHAOS-PKT"
DEFAULTS = {"delay_ms": 100.0, "jitter_ms": 0.0, "percent": 10.0}

MENU = Menu(
    "packet",
    kinds=(
        Kind(
            "delay",
            "netem delays what the targets send (needs netem in the kernel)",
            reads=("delay_ms", "jitter_ms"),
            draws=(Pick("delay_ms", (20, 100, 500)), Pick("jitter_ms", (0, 10, 50))),
        ),
        Kind(
            "loss",
            "iptables drops a share of what the targets receive from other nodes",
            reads=("percent",),
            draws=(Pick("percent", (5, 20, 50)),),
        ),
        Kind(
            "duplicate",
            "netem duplicates a share of what the targets send (needs netem)",
            reads=("percent",),
            draws=(Pick("percent", (5, 20, 50)),),
        ),
        Kind(
            "reorder",
            "netem delays all but a share of what the targets send, reordering it (needs netem)",
            reads=("delay_ms", "jitter_ms", "percent"),
            draws=(Pick("percent", (10, 25, 50)), Pick("delay_ms", (20, 100))),
        ),
    ),
    meaning="packet faults on the targets; stop clears them from every node",
    effects=(DEGRADED,),
    params=(
        Param("delay_ms", "packet delay, ms", ">= 0", DEFAULTS["delay_ms"]),
        Param("jitter_ms", "packet delay jitter, ms", ">= 0", DEFAULTS["jitter_ms"]),
        Param(
            "percent",
            "share of packets lost, duplicated or reordered",
            "(0, 100]",
            DEFAULTS["percent"],
        ),
    ),
    targets=("one", "minority", "all"),
)


def netem_args(kind: str, params: dict[str, Any]) -> list[str]:
    """The netem options for a kind; reordering needs a delay to reorder against."""
    p = {key: number(params, key, default) for key, default in DEFAULTS.items()}
    if p["delay_ms"] < 0 or p["jitter_ms"] < 0:
        raise NemesisError(f"packet delay_ms and jitter_ms must not be negative, got {params}")
    if kind in ("duplicate", "reorder") and not 0 < p["percent"] <= 100:
        raise NemesisError(f"packet {kind} percent must be in (0, 100], got {p['percent']:g}")
    delay = ["delay", f"{p['delay_ms']:g}ms"] + (
        [f"{p['jitter_ms']:g}ms"] if p["jitter_ms"] else []
    )
    if kind == "delay":
        return delay
    if kind == "duplicate":
        return ["duplicate", f"{p['percent']:g}%"]
    if kind == "reorder":
        return [*delay, "reorder", f"{p['percent']:g}%", "50%"]
    raise NemesisError(
        f"unknown packet kind '{kind}': choose one of {', '.join(MENU.kind_names())}"
    )


def loss_rules(peer_ips: list[str], percent: float) -> list[str]:
    if not 0 < percent <= 100:
        raise NemesisError(f"packet loss percent must be in (0, 100], got {percent:g}")
    p = f"{percent / 100:.4f}"
    return [
        f"-A {CHAIN} -s {ip}/32 -m statistic --mode random --probability {p} -j DROP"
        for ip in sorted(peer_ips)
    ]


def apply_netem(node: Exec, args: list[str]) -> None:
    cmd = ["tc", "qdisc", "replace", "dev", layout_of(node).interface, "root", "netem", *args]
    result = node.exec(cmd, timeout=30)
    if "qdisc kind is unknown" in result.stderr:
        raise NotApplied(
            f"node {node.name}: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so packet "
            "delay, duplicate and reorder cannot run here; packet loss works without it"
        )
    if not result.ok:
        run(node, cmd)  # raises with the node's own words


def clear(node: Exec) -> bool:
    """Removes our netem qdisc and loss chain; the kernel's default qdisc needs no deleting."""
    dev = layout_of(node).interface
    shown = node.exec(["tc", "qdisc", "show", "dev", dev, "root"]).stdout
    had_netem = "netem" in shown
    if had_netem:
        run(node, ["tc", "qdisc", "del", "dev", dev, "root"])
    return bool(remove_chain(node, CHAIN)) or had_netem


class PacketNemesis:
    fault = "packet"
    menu = MENU

    def check(self, step: FaultStep) -> dict[str, Any]:
        MENU.check_keys(step)
        if step.kind == "loss":
            percent = number(step.params, "percent", DEFAULTS["percent"])
            loss_rules([], percent)  # refuses a share outside (0, 100]
            return {"percent": percent}
        return {"netem": netem_args(step.kind, step.params)}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        # Parameters and targets first: a step that cannot be done must change no node.
        ips = [n.ip for n in ctx.topology.nodes]
        with before_touching():
            params = self.check(step)
            found = resolve(ctx, step.target or "one", random.Random(step.seed), step.params)
        nodes, down = split_running(ctx.nodes[t] for t in found.targets)
        out: dict[str, Any] = {"kind": step.kind, **found.record()}
        if down:
            out["not_running"] = down
        if step.kind == "loss":
            percent = params["percent"]
            rules = on_each(
                nodes, lambda n: install_chain(n, CHAIN, loss_rules(_others(ips, n.ip), percent))
            )
            degraded = effect(DEGRADED, found.targets, by="iptables")
            return {**out, "percent": percent, "rules": rules, EFFECTS: [degraded]}
        args = params["netem"]
        if nodes:
            # One node first: a kernel without netem refuses there, before any node has changed.
            apply_netem(nodes[0], args)
            on_each(nodes[1:], lambda n: apply_netem(n, args))
        devs = sorted({layout_of(n).interface for n in nodes}) or [DEV]
        return {
            **out,
            "dev": devs[0] if len(devs) == 1 else devs,
            "netem": " ".join(args),
            EFFECTS: [effect(DEGRADED, found.targets, by="netem")],
        }

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        cleared = on_each(holding_rules(ctx), clear)
        return {"kind": step.kind, "cleared": sorted(n for n, c in cleared.items() if c)}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        cleared = on_each(holding_rules(ctx), clear)
        return [
            f"{n}: removed netem qdisc and {CHAIN} chain" for n, c in sorted(cleared.items()) if c
        ]


def _others(ips: list[str], own: str) -> list[str]:
    return [ip for ip in ips if ip != own]
