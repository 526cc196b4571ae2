"""What ``--nemesis`` names: packages, or single kinds and targets of them, checked on the menus.

An item is ``package`` (the plan draws any of its kinds, as before items had more), or
``package:kind``, ``package:kind@target``, ``package@target``. Kill and pause have no target
apart from their kind (``kill@active-controller`` is the kind ``active-controller``); for the
other packages ``package@target`` draws among the kinds that read a target. Every item is
checked against the package's menu and the run's topology, and each problem is one sentence
naming what would have been valid, so a nightly spec fails before any cluster is built.

``choreo`` and ``choreo:<name>`` name choreographies (nemesis/choreo.py): sequences the plan
draws as other packages' steps, on roles of their own; they take no target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusters.topology import TOPOLOGIES, Topology, build_topology
from nemesis.api import TARGETS
from nemesis.choreo import CHOREO, CHOREOGRAPHIES, ChoreoError, check_brokers
from nemesis.menu import Menu
from nemesis.process import AIMED_ONLY_ON
from nemesis.registry import MENUS
from nemesis.shutdown import ON_DISK_LAYER as SHUTDOWN_ON_LAYER
from nemesis.targets import could_name

SYNTAX = "package, package:kind, package:kind@target or package@target"
EXAMPLE = "partition:isolate-active-controller,kill@active-controller,clock:strobe"
_ITEM = re.compile(r"(?P<package>[^:@\s]+)(?::(?P<kind>[^:@\s]+))?(?:@(?P<target>[^:@\s]+))?")


class ItemError(ValueError):
    """A nemesis item that names nothing the run could draw; the message is the whole story."""


@dataclass(frozen=True)
class Item:
    """One item of ``--nemesis``, as the plan draws it on the run's topology."""

    text: str  # as given: plan.json records the spec's items unchanged
    package: str
    # The kinds the plan draws among (the topology's, in the menu's order); None: the package's
    # whole menu, drawn exactly as a bare package name always was.
    kinds: tuple[str, ...] | None
    target: str | None  # a named target fixes every step's target (kill and pause: the kind)

    @property
    def key(self) -> tuple[str, tuple[str, ...] | None, str | None]:
        """What the item means, whatever its spelling (``kill:one`` is ``kill@one``)."""
        return self.package, self.kinds, self.target


def split(text: str) -> tuple[str, str | None, str | None]:
    """(package, kind, target) as written; the spelling only, not the menus."""
    m = _ITEM.fullmatch(text)
    if m is None:
        raise ItemError(f"nemesis item '{text}' is not {SYNTAX} (e.g. {EXAMPLE})")
    return m["package"], m["kind"], m["target"]


def _listed(names: list[str] | tuple[str, ...]) -> str:
    return ", ".join(names) or "none"


def _aimed_on(selector: str, topology: str) -> bool:
    """Whether a plan may aim ``selector`` on ``topology`` (the rule kill's menu follows)."""
    only = AIMED_ONLY_ON.get(selector)
    return only is None or topology in only


def _reaches(menu: Menu, kind: str, selector: str, topo: Topology) -> bool:
    """Whether a step of ``kind`` aimed at ``selector`` can act on a node it names, as the menu
    says (jvm kinds hook code only some nodes run: a ZooKeeper runs none; controller-stall
    needs a controller)."""
    named = set(could_name(selector, topo))
    return any(menu.can_act_on(kind, n, topo) for n in topo.nodes if n.name in named)


class _Checker:
    """Checks items against the menus for one topology."""

    def __init__(self, topology: str, zookeepers: int, controllers: int = 3) -> None:
        self.topology = topology
        self.topo = build_topology(topology, zookeepers=zookeepers if zookeepers in (1, 3) else 1)
        # The cluster as it will be, for what depends on its size (a choreography's roles).
        self.sized = build_topology(
            topology,
            zookeepers=zookeepers if zookeepers in (1, 3) else 1,
            controllers=controllers if 1 <= controllers <= 9 else 3,
        )

    def choreography(self, text: str, kind: str | None, target: str | None) -> Item:
        """``choreo`` or ``choreo:<name>``: the choreographies its turns draw among."""
        if target is not None:
            raise ItemError(
                f"{text}: a choreography takes no target: it draws its own roles (which "
                "minority, which node loses power) with the plan's seed"
            )
        if kind is not None and kind not in CHOREOGRAPHIES:
            raise ItemError(
                f"{text}: {CHOREO} has no choreography '{kind}': its choreographies are "
                f"{_listed(list(CHOREOGRAPHIES))}"
            )
        names = (kind,) if kind is not None else tuple(CHOREOGRAPHIES)
        try:
            for name in names:
                check_brokers(name, self.sized)
        except ChoreoError as exc:
            raise ItemError(f"{text}: {exc}") from None
        return Item(text, CHOREO, (kind,) if kind is not None else None, None)

    def kinds(self, menu: Menu) -> list[str]:
        return [k.name for k in menu.kinds_for(self.topology)]

    def targets(self, menu: Menu, kind: str) -> list[str]:
        """The selectors a spec may name for a step of ``kind`` on this topology."""
        if not menu.takes_target(kind):
            return []
        refused = menu.kind(kind).refuses
        return [
            t
            for t in TARGETS
            if t not in refused
            and _aimed_on(t, self.topology)
            and _reaches(menu, kind, t, self.topo)
        ]

    def kind(self, menu: Menu, kind: str, item: str) -> str:
        on = self.kinds(menu)
        if kind in on:
            return kind
        what = "target" if menu.kind_is_target else "kind"
        if kind in menu.kind_names():
            only = ", ".join(menu.kind(kind).only_on or ())
            why = f"{menu.fault} {what} '{kind}' is only for {only}"
        else:
            why = f"{menu.fault} has no {what} '{kind}'"
        these = "targets (its kinds)" if menu.kind_is_target else "kinds"
        raise ItemError(f"{item}: {why}: its {these} on {self.topology} are {_listed(on)}")

    def target(self, menu: Menu, kinds: list[str], target: str, item: str) -> tuple[str, ...]:
        """The kinds among ``kinds`` a step may aim at ``target``; an error when there is none."""
        fits = tuple(k for k in kinds if target in self.targets(menu, k))
        if fits:
            return fits
        takers = [k for k in kinds if menu.takes_target(k)]
        if not takers:
            aimed = [k for k in self.kinds(menu) if menu.takes_target(k)]
            which = f"kind '{kinds[0]}' takes" if len(kinds) == 1 else "kinds take"
            raise ItemError(
                f"{item}: {menu.fault} {which} no target (the kind says who); "
                f"the {menu.fault} kinds that do on {self.topology} are {_listed(aimed)}"
            )
        valid = sorted({t for k in takers for t in self.targets(menu, k)}, key=TARGETS.index)
        if target not in TARGETS:
            why = f"'{target}' is no target"
        elif not _aimed_on(target, self.topology):
            why = f"target '{target}' is only for {', '.join(AIMED_ONLY_ON[target])}"
        elif all(target in menu.kind(k).refuses for k in takers):
            why = f"{menu.fault} {'/'.join(takers)} refuses target '{target}'"
        else:
            why = f"target '{target}' names no node {menu.fault} {'/'.join(takers)} acts on"
        whose = f"{menu.fault}:{kinds[0]}" if len(kinds) == 1 else menu.fault
        raise ItemError(f"{item}: {why}: {whose} takes {_listed(valid)} on {self.topology}")

    def item(self, text: str) -> Item:
        package, kind, target = split(text)
        if package == CHOREO:
            return self.choreography(text, kind, target)
        menu = MENUS[package]
        if menu.kind_is_target:
            if kind is not None and target is not None and kind != target:
                raise ItemError(
                    f"{text}: a {package} kind is its target, so the item names two: write "
                    f"{package}@{target} or {package}:{kind}"
                )
            named = kind or target
            if named is None:
                return Item(text, package, None, None)
            return Item(text, package, (self.kind(menu, named, text),), None)
        if kind is not None:
            kinds = [self.kind(menu, kind, text)]
        elif target is not None:
            kinds = self.kinds(menu)
        else:
            return Item(text, package, None, None)
        if target is None:
            return Item(text, package, tuple(kinds), None)
        return Item(text, package, self.target(menu, kinds, target, text), target)


def targets_on(package: str, kind: str, topology: str) -> list[str]:
    """The targets a spec may name for ``package:kind`` on ``topology`` (``kchaos nemeses``)."""
    menu = MENUS[package]
    if not menu.kind(kind).applies_to(topology):
        return []
    if menu.kind_is_target:
        return [kind]
    return _Checker(topology, 3).targets(menu, kind)


def aimed_on(selector: str) -> list[str]:
    """The topologies a plan may aim ``selector`` on."""
    return [t for t in TOPOLOGIES if _aimed_on(selector, t)]


def parse_items(
    texts: list[str], topology: str, zookeepers: int = 1, controllers: int = 3
) -> list[Item]:
    """Every item checked on ``topology``: unknown packages first (all of them in one sentence),
    then each item's kind and target, then items that mean the same thing twice."""
    valid = sorted(MENUS)
    unknown = [split(t)[0] for t in texts if split(t)[0] not in (*valid, CHOREO)]
    if unknown:
        raise ItemError(
            f"unknown nemesis {', '.join(repr(n) for n in dict.fromkeys(unknown))}: valid "
            f"nemeses are {', '.join(valid)}, and {CHOREO} (choreographies) (items are "
            f"{SYNTAX}; `kchaos nemeses` lists them)"
        )
    checker = _Checker(topology, zookeepers, controllers)
    items = [checker.item(t) for t in texts]
    seen: dict[tuple[str, tuple[str, ...] | None, str | None], str] = {}
    for item in items:
        if item.key in seen:
            same = "" if seen[item.key] == item.text else f" (as {seen[item.key]} and {item.text})"
            raise ItemError(f"nemesis {texts} names {item.text} twice{same}")
        seen[item.key] = item.text
    return items


def packages(texts: list[str]) -> list[str]:
    """The packages the items name, each once, in order (what the run builds); a choreography
    item names the packages its steps are of."""
    out: list[str] = []
    for text in texts:
        package, kind, _ = split(text)
        if package != CHOREO:
            out.append(package)
            continue
        for name in (kind,) if kind in CHOREOGRAPHIES else tuple(CHOREOGRAPHIES):
            out += CHOREOGRAPHIES[name].packages
    return list(dict.fromkeys(out))


def named_selectors(texts: list[str]) -> set[str]:
    """The selectors the items name, as kind (kill, pause) or target."""
    return {n for t in texts for n in split(t)[1:] if n is not None}


def on_disk_layer(texts: list[str]) -> bool:
    """Whether the items name a fault that acts on the disk layer (docs/disk.md), so that the
    run's nodes must run on it: the disk package (``disk``, ``disk:kind``, ``disk@t``), or a
    kind of another package that loses a node's power (shutdown's elr-power-loss), or a
    choreography that powers a node off (``choreo``, ``choreo:<name>``). Never raises: an item
    spelled wrong is refused by ``parse_items``, with its sentence."""
    for text in texts or ():
        try:
            package, kind, _ = split(text)
        except ItemError:
            continue  # parse_items says what is wrong with it
        if package == "disk" or (package == "shutdown" and kind in SHUTDOWN_ON_LAYER):
            return True
        if package == CHOREO:
            chosen = (kind,) if kind in CHOREOGRAPHIES else tuple(CHOREOGRAPHIES)
            if any("disk" in CHOREOGRAPHIES[c].packages for c in chosen):
                return True
    return False
