"""What a fault package offers a plan: its kinds, who they hit, what they read, where they apply,
and the one way a plan draws a fault from it.

Each package module declares its ``MENU`` beside the code that carries the faults out, so a kind,
its parameters' ranges and their meanings are written in one place. ``harness/plan.py`` decides
*when* faults happen and asks a menu *what* (``Menu.draw``); the package's ``check`` refuses a
step its menu does not allow (``Menu.check_keys``); ``kchaos nemeses`` prints every menu.

Each kind also declares its *effects* (history/effects.py): what its start does to nodes and
links (down, stopped, cut, degraded, skewed, stalled, ...), and the package's stops what they
do (restarted, resumed). The package writes them, with the nodes it acted on, into its ops'
values; the checkers read those and never the package's name (``Menu.effects_of``, and the
menu tests hold every effect a package writes to what its menu declares).

A menu is data, and ``draw`` is pure in its random stream: the same stream gives the same steps,
which is what keeps plan.json byte-identical for the same seed and options.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clusters.topology import NodeSpec, Topology
from nemesis.api import NAMED, NAMED_PARAM, FaultStep
from nemesis.errors import NemesisError

# The selector that reads a step parameter of its own (nemesis/targets.py partition_leader).
PARTITION_LEADER = "partition-leader"
SELECTOR_PARAM = "partition"
SELECTOR_PARAM_MEANING = "partition-leader selector: the 'topic-partition' whose leader is meant"


@dataclass(frozen=True)
class Param:
    """A key of ``FaultStep.params``; the unit is in the name (``_s`` seconds, ``_ms`` ms)."""

    name: str
    meaning: str
    accepts: str  # the values ``check`` accepts, in words
    default: float | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "meaning": self.meaning,
            "accepts": self.accepts,
            "default": self.default,
        }


@dataclass(frozen=True)
class Pick:
    """A parameter the plan draws from a few values (kept as written: 5 and 5.0 differ in JSON)."""

    param: str
    values: tuple[Any, ...]

    def draw(self, rng: random.Random, interval: float) -> Any:
        return rng.choice(self.values)

    def describe(self) -> str:
        return "one of " + ", ".join(v if isinstance(v, str) else f"{v:g}" for v in self.values)


@dataclass(frozen=True)
class Interval:
    """A parameter the plan sets to the fault's interval (no draw): the fault lasts while on."""

    param: str
    at_least: float

    def draw(self, rng: random.Random, interval: float) -> Any:
        return max(self.at_least, round(interval, 3))

    def describe(self) -> str:
        return f"the nemesis interval, at least {self.at_least:g}"


Draw = Pick | Interval


@dataclass(frozen=True)
class Kind:
    name: str
    meaning: str
    # Keys of FaultStep.params this kind reads; any other key is refused.
    reads: tuple[str, ...] = ()
    # What the plan draws for it, in draw order (the order is part of the seed's meaning).
    draws: tuple[Draw, ...] = ()
    # Topologies where a plan may choose it (None: all); ``check`` does not refuse it elsewhere.
    only_on: tuple[str, ...] | None = None
    # False: a plan chooses it only where a spec names it, never for a bare package name.
    drawn: bool = True
    # What its start does (history/effects.py names); empty: the menu's ``effects``.
    effects: tuple[str, ...] = ()
    # Target selectors a step of this kind refuses (disk corrupt: majority and all); the plan
    # draws its target among the menu's others.
    refuses: tuple[str, ...] = ()
    # Kinds of the same menu that do the same on fewer nodes or links, which `kchaos shrink`
    # may put in its place (docs/shrink.md); each reads no parameter this one does not.
    simpler: tuple[str, ...] = ()

    def applies_to(self, topology: str) -> bool:
        return self.only_on is None or topology in self.only_on


@dataclass(frozen=True)
class Menu:
    fault: str
    kinds: tuple[Kind, ...]
    meaning: str = ""
    params: tuple[Param, ...] = ()
    # How a step's target is chosen: the kind itself is a selector (kill, pause), or the plan
    # draws one of ``targets``; neither: the step has no target (the kind says who).
    kind_is_target: bool = False
    targets: tuple[str, ...] = ()
    # Where the target comes from when a step has none, for the listing.
    targets_note: str = ""
    # The kinds that read a step's target, so that a spec may name one (``clock:bump@all``);
    # None: every kind. Kill and pause need none: their kind is the target.
    target_kinds: tuple[str, ...] | None = None
    # What a start does (history/effects.py names), for every kind that declares none itself.
    effects: tuple[str, ...] = ()
    # What a stop may do besides ending the fault (restarted, resumed); empty: nothing more.
    stop_effects: tuple[str, ...] = ()
    # The nodes a step of a kind can act on, (kind, node, topology) -> bool; None: every node.
    # A spec may aim a kind only at a target that can name one of them.
    acts_on: Callable[[str, NodeSpec, Topology], bool] | None = None

    def kind_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kinds)

    def kind(self, name: str) -> Kind:
        for k in self.kinds:
            if k.name == name:
                return k
        raise NemesisError(
            f"unknown {self.fault} kind '{name}': choose one of {', '.join(self.kind_names())}"
        )

    def effects_of(self, kind: str) -> tuple[str, ...]:
        """The effects a start of ``kind`` may record (history/effects.py)."""
        return self.kind(kind).effects or self.effects

    def kinds_for(self, topology: str) -> list[Kind]:
        """The kinds a plan may choose on ``topology``, in the menu's order."""
        return [k for k in self.kinds if k.applies_to(topology)]

    def can_act_on(self, kind: str, node: NodeSpec, topology: Topology) -> bool:
        """Whether a step of ``kind`` can act on ``node`` at all (``acts_on``)."""
        return self.acts_on is None or self.acts_on(kind, node, topology)

    def takes_target(self, kind: str) -> bool:
        """Whether a step of ``kind`` reads a target a spec may name (kill and pause: the kind
        is the target, so ``kill@one`` names the kind)."""
        return self.kind_is_target or self.target_kinds is None or kind in self.target_kinds

    def draw(
        self,
        rng: random.Random,
        topology: str,
        interval: float,
        start_s: float,
        stop_s: float | None,
        kinds: tuple[str, ...] | None = None,
        target: str | None = None,
    ) -> list[FaultStep]:
        """One fault on ``topology``: its start step, and its stop step unless ``stop_s`` is None.

        Draws, in this order: the kind, the target (when the plan chooses one), the step's seed
        (which resolves the target at fault time), then the kind's parameters. A spec that named
        ``kinds`` (the run's topology's, checked by the caller) draws among those only, and no
        draw for a single one; a named ``target`` is the step's target, not drawn.
        """
        if kinds is None:
            kind = rng.choice([k for k in self.kinds_for(topology) if k.drawn])
        elif len(kinds) == 1:
            kind = self.kind(kinds[0])
        else:
            kind = rng.choice([self.kind(k) for k in kinds])
        if target is None and self.kind_is_target:
            target = kind.name
        elif target is None and self.targets:
            target = rng.choice([t for t in self.targets if t not in kind.refuses])
        seed = rng.getrandbits(32)
        params = {d.param: d.draw(rng, interval) for d in kind.draws}
        steps = [FaultStep(start_s, "start", self.fault, kind.name, target, seed, params)]
        if stop_s is not None:
            steps.append(FaultStep(stop_s, "stop", self.fault, kind.name, target, seed, params))
        return steps

    def check_keys(self, step: FaultStep) -> None:
        """Refuses a kind this package does not have, or a parameter its kind does not read."""
        if step.fault != self.fault:
            raise NemesisError(f"the {self.fault} package cannot carry out a {step.fault} step")
        allowed = set(self.kind(step.kind).reads)
        if PARTITION_LEADER in (step.target, step.kind):
            allowed.add(SELECTOR_PARAM)
        if step.target == NAMED:
            # A plan's named nodes (a choreography's roles): the list, checked here, and the
            # cluster's names when the step is carried out (nemesis/targets.py named_nodes).
            allowed.add(NAMED_PARAM)
            names = step.params.get(NAMED_PARAM)
            if (
                not isinstance(names, list)
                or not names
                or not all(isinstance(n, str) for n in names)
            ):
                raise NemesisError(
                    f"{step.fault} {step.kind} at target '{NAMED}' needs params "
                    f"{NAMED_PARAM}: a list of node names, not {names!r}"
                )
        unknown = sorted(set(step.params) - allowed)
        if unknown:
            takes = ", ".join(sorted(allowed)) or "no parameters"
            raise NemesisError(
                f"{step.fault} {step.kind} does not read {', '.join(unknown)}: it takes {takes}"
            )

    def describe(self) -> dict[str, Any]:
        """The menu as plain data (``kchaos nemeses --json``)."""
        if self.kind_is_target:
            targets = "the kind is the target"
        elif self.targets:
            targets = "drawn from " + ", ".join(self.targets)
        else:
            targets = self.targets_note or "none"
        return {
            "fault": self.fault,
            "meaning": self.meaning,
            "targets": targets,
            # The kinds a spec may aim at a target it names (package:kind@target); none for
            # kill and pause, whose kind is the target.
            "target_kinds": []
            if self.kind_is_target
            else [k.name for k in self.kinds if self.takes_target(k.name)],
            "kinds": [
                {
                    "kind": k.name,
                    "meaning": k.meaning,
                    "reads": list(k.reads),
                    "plan_draws": {d.param: d.describe() for d in k.draws},
                    "only_on": list(k.only_on) if k.only_on is not None else None,
                    "effects": list(self.effects_of(k.name)),
                    **({} if k.drawn else {"drawn": False}),
                }
                for k in self.kinds
            ],
            "params": [p.describe() for p in self.params],
            "stop_effects": list(self.stop_effects),
        }
