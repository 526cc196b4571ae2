"""What a fault step did to which nodes and links: the words nemeses write and checkers read.

A nemesis op's `ok` value carries `effects` (docs/history.md, "Nemesis operations"): a list of
records, each one effect on some nodes or links. A checker decides from these, never from the
package's name, so a new fault package is judged by what it says it did. Jepsen's rule holds:
the fault is an operation in the history, and the operation says what it did.

Histories written before `effects` existed are read too: `op_effects` derives an op's effects
from what its value carried (`legacy_effects`), once, here. An effect name a reader does not
know is kept as it is; readers treat it as disrupting the nodes it names (every node when it
names none) and say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

EFFECTS = "effects"  # the key of a nemesis op's value that holds its effects

# Nemesis op names: start-<package>, stop-<package>, and the run's one heal per package.
START, STOP, HEAL = "start-", "stop-", "heal"
# The key of a stop's value that names the only nodes whose faults of its package it ended (a
# choreography resumes one paused minority while another stays paused: nemesis/choreo.py);
# absent, as in every stop before it: each fault of its package ended there.
ENDS_ONLY = "ends_only"

# What a fault does to a node or a link.
DOWN = "down"  # the node's JVM is gone (SIGKILL): it neither acts nor answers
STOPPED = "stopped"  # the JVM is stopped (SIGSTOP): present, holding its sockets, doing nothing
CUT = "cut"  # links between pairs of nodes drop every packet
DEGRADED = "degraded"  # what the nodes send or receive is delayed, lost, duplicated or reordered
SKEWED = "skewed"  # the nodes' wall clocks are offset (or set back: a jump all the same)
STALLED = "stalled"  # a code path inside the JVM waits or fails; `side` says whose code
RESTARTED = "restarted"  # the node's JVM was started again (after it exited, or to reload it)
RESUMED = "resumed"  # the node's stopped JVM was sent SIGCONT
# A client's transactional producer fenced by another producer's InitProducerId (a hijack of its
# transactional.id): no node is touched (`nodes` empty); the op's value names the worker `slot`.
FENCED = "fenced"
KNOWN = (DOWN, STOPPED, CUT, DEGRADED, SKEWED, STALLED, RESTARTED, RESUMED, FENCED)

# A start with only these effects leaves every earlier fault in place: none starts a stopped or
# exited JVM or removes another fault's rules. Any other effect (a clock fault restarts the JVM
# it first skews, a JVM fault may halt it, a word not known here) may undo one.
LEAVES_OTHERS = frozenset({DOWN, STOPPED, CUT, DEGRADED, FENCED})

# `side` of a STALLED effect: only that role's code paths are slowed, the node's other role runs.
CONTROLLER, BROKER = "controller", "broker"

Link = frozenset[str]  # two node names


@dataclass(frozen=True)
class Effect:
    """One effect of a fault step; plain data, written as `to_json` gives it."""

    effect: str  # one of KNOWN, or a word this reader does not know
    nodes: frozenset[str] | None = None  # the nodes it was aimed at; None: not said, any node
    # The nodes it was seen to take hold on (a JVM that exited, a JVM that stopped); None: not
    # said. Certain effects are drawn only from these.
    done: frozenset[str] | None = None
    links: frozenset[Link] | None = None  # CUT: the pairs cut; None: not said
    side: str | None = None  # STALLED: CONTROLLER or BROKER; None: the whole node
    by: str | None = None  # how, in words: SIGKILL, iptables, netem, libfaketime, Byteman

    @property
    def known(self) -> bool:
        return self.effect in KNOWN

    def on(self, node: str) -> bool:
        """Whether it was aimed at `node` (an effect that names no node: any node)."""
        return self.nodes is None or node in self.nodes

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"effect": self.effect}
        if self.nodes is not None:
            out["nodes"] = sorted(self.nodes)
        if self.done is not None:
            out["done"] = sorted(self.done)
        if self.links is not None:
            out["links"] = sorted(sorted(p) for p in self.links)
        if self.side is not None:
            out["side"] = self.side
        if self.by is not None:
            out["by"] = self.by
        return out

    @classmethod
    def from_json(cls, d: Any) -> Effect:
        """A record as written; anything unreadable is an effect nobody knows, on any node."""
        if not isinstance(d, dict):
            return cls("unreadable")
        links = d.get("links")
        return cls(
            str(d.get("effect")),
            _names(d.get("nodes")),
            _names(d.get("done")),
            frozenset(frozenset(map(str, p)) for p in links if isinstance(p, list) and len(p) == 2)
            if isinstance(links, list)
            else None,
            d.get("side") if isinstance(d.get("side"), str) else None,
            d.get("by") if isinstance(d.get("by"), str) else None,
        )


def effect(
    name: str,
    nodes: Iterable[str] | None = None,
    done: Iterable[str] | None = None,
    links: Iterable[Iterable[str]] | None = None,
    side: str | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """One effect record as a nemesis writes it into its op's value."""
    return Effect(
        name,
        None if nodes is None else frozenset(nodes),
        None if done is None else frozenset(done),
        None if links is None else frozenset(frozenset(p) for p in links),
        side,
        by,
    ).to_json()


def started(f: str) -> str | None:
    """The package a `start-<package>` op names; None for any other op."""
    return f[len(START) :] if f.startswith(START) else None


def ends_only(value: Any) -> frozenset[str] | None:
    """The nodes a stop op ended its package's faults on, when its value names them
    (`ENDS_ONLY`); None: every fault of its package."""
    return _names(value.get(ENDS_ONLY)) if isinstance(value, dict) else None


def ends(stop_value: Any, nodes: frozenset[str] | None) -> bool:
    """Whether a stop with `stop_value` ended a fault of its package on `nodes` (None: nodes
    not said, any node)."""
    only = ends_only(stop_value)
    return only is None or nodes is None or bool(only & nodes)


def op_effects(f: str, value: Any, names: Iterable[str]) -> tuple[Effect, ...]:
    """What a nemesis op did: its `effects` when it wrote them, else what `legacy_effects`
    derives from its value. `names`: the cluster's node names."""
    written = value.get(EFFECTS) if isinstance(value, dict) else None
    if isinstance(written, list):
        return tuple(Effect.from_json(e) for e in written)
    return legacy_effects(f, value, names)


# -- histories without `effects` -------------------------------------------------------------

# The value key each signal fault named its acted-on nodes by (nemesis/process.py took_key).
_ACTED_KEY = {"kill": "exited_after_s", "pause": "stopped_after_s"}
_SIGNAL = {"kill": (DOWN, "SIGKILL"), "pause": (STOPPED, "SIGSTOP")}
_STOPPED_BY = {"stop-kill": (RESTARTED, "restarted"), "stop-pause": (RESUMED, "resumed")}
_STOPPED_BY["stop-jvm"] = (RESTARTED, "restarted")  # fsync-error starts a halted JVM again
# A heal by one package (each package healed apart before the run's one heal_cluster; a package
# from outside the registry still does) did what its stop does, to the nodes its actions name.
_HEALED_BY = {"kill": RESTARTED, "pause": RESUMED}
_CONTROLLER_KINDS = ("controller-stall",)
_BROKER_KINDS = ("heartbeat-delay",)


def legacy_effects(f: str, value: Any, names: Iterable[str]) -> tuple[Effect, ...]:
    """The effects of a nemesis op that wrote none: a history from before `effects`, or a start
    or stop that did not complete ok (its value is then the plan step, which names no nodes).

    This is the one place that reads the packages' names and value keys of old histories
    (kill, pause, partition, packet, clock, jvm, as nemesis/ wrote them before `effects`, and a
    heal by kill or pause). A start of any other package gives one effect nobody knows, aimed
    at the nodes its value mentions (any node when it mentions none), which readers treat as
    disrupting those.
    """
    names = sorted(names)
    package = started(f)
    if f == HEAL:
        by = value.get("by") if isinstance(value, dict) else None
        if by not in _HEALED_BY:
            return ()
        return (Effect(_HEALED_BY[by], _said(value.get("actions"), names)),)
    if package is None:
        stop = _STOPPED_BY.get(f)
        listed = value.get(stop[1]) if stop is not None and isinstance(value, dict) else None
        if stop is None or listed is None:
            return ()
        return (Effect(stop[0], _named(listed, names) or frozenset()),)
    if package in _SIGNAL:
        name, signal = _SIGNAL[package]
        by = value.get("signal") if isinstance(value, dict) else None
        acted = value.get(_ACTED_KEY[package]) if isinstance(value, dict) else None
        done = frozenset(map(str, acted)) if isinstance(acted, dict) else frozenset()
        return (Effect(name, _targets(value, package, names), done, by=by or signal),)
    if package == "partition":
        pairs = cut_pairs(value)
        nodes = None if pairs is None else frozenset(n for p in pairs for n in p)
        return (Effect(CUT, nodes, links=pairs, by="iptables"),)
    if package == "packet":
        return (Effect(DEGRADED, _targets(value, package, names), by=_packet_by(value)),)
    if package == "clock":
        out = [Effect(SKEWED, _targets(value, package, names), by="libfaketime")]
        restarted = value.get("restarted") if isinstance(value, dict) else None
        if isinstance(restarted, list) and restarted:
            out.append(Effect(RESTARTED, frozenset(map(str, restarted)), by="libfaketime"))
        return tuple(out)
    if package == "jvm":
        kind = value.get("kind") if isinstance(value, dict) else None
        side = (
            CONTROLLER if kind in _CONTROLLER_KINDS else BROKER if kind in _BROKER_KINDS else None
        )
        return (Effect(STALLED, _targets(value, package, names), side=side, by="Byteman"),)
    return (Effect("unknown", _named(value, names), by=package),)


def cut_pairs(value: Any) -> frozenset[Link] | None:
    """The pairs a partition's grudge separates (either side's rules cut TCP); None when the
    value has no grudge to read. A pair whose two nodes were both down at the start got no
    rules at all (nemesis/partition.py `not_running`): not cut."""
    grudge = value.get("grudge") if isinstance(value, dict) else None
    if not isinstance(grudge, dict):
        return None
    return grudge_pairs(grudge, value.get("not_running") or [])


def grudge_pairs(grudge: dict[str, Any], down: Iterable[str] = ()) -> frozenset[Link]:
    """The pairs a grudge (node -> the nodes it drops) cuts, but for two nodes both `down`."""
    gone = set(down)
    pairs = set()
    for a, drops in grudge.items():
        for b in drops if isinstance(drops, list) else []:
            if a != b and not (a in gone and b in gone):
                pairs.add(frozenset((str(a), str(b))))
    return frozenset(pairs)


def _packet_by(value: Any) -> str:
    return "iptables" if isinstance(value, dict) and value.get("kind") == "loss" else "netem"


def _names(listed: Any) -> frozenset[str] | None:
    return frozenset(map(str, listed)) if isinstance(listed, list) else None


def _named(value: Any, names: Iterable[str]) -> frozenset[str] | None:
    """The node names a value mentions as JSON strings; None when it mentions none."""
    text = json.dumps(value)  # searched, not written
    hit = frozenset(n for n in names if f'"{n}"' in text)
    return hit or None


def _said(actions: Any, names: Iterable[str]) -> frozenset[str]:
    """The node names a heal's actions (sentences) mention as words."""
    text = " ".join(map(str, actions)) if isinstance(actions, list) else ""
    return frozenset(n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text))


def _targets(value: Any, package: str, names: Iterable[str]) -> frozenset[str] | None:
    if isinstance(value, dict):
        listed = value.get("targets")
        acted = value.get(_ACTED_KEY.get(package, ""))
        found = set(listed) if isinstance(listed, list) else set()
        found |= set(acted) if isinstance(acted, dict) else set()
        found |= set(value.get("not_running") or [])
        if found:
            return frozenset(str(n) for n in found)
    return _named(value, names)
