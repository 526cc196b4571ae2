"""Each package's menu: what a plan may draw from it, and what its check accepts, agree."""

from __future__ import annotations

import random

import pytest

from clusters.topology import TOPOLOGIES
from nemesis.registry import FAULT_KINDS, MENUS, NEMESES, build


@pytest.mark.parametrize("name", list(NEMESES))
def test_every_package_carries_the_menu_of_its_own_fault(name):
    assert MENUS[name].fault == name == NEMESES[name].fault
    assert FAULT_KINDS[name] == MENUS[name].kind_names()


@pytest.mark.parametrize("name", list(NEMESES))
def test_every_kind_reads_only_parameters_its_package_explains(name):
    menu = MENUS[name]
    explained = {p.name for p in menu.params}
    for kind in menu.kinds:
        assert set(kind.reads) <= explained, kind.name
        assert {d.param for d in kind.draws} <= set(kind.reads), kind.name
        assert kind.only_on is None or set(kind.only_on) <= set(TOPOLOGIES)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("name", list(NEMESES))
def test_every_drawn_step_passes_its_package_check(name, topology):
    menu, nemesis = MENUS[name], build([name])[name]
    rng = random.Random(f"menus/{name}/{topology}")
    for _ in range(200):
        start, stop = menu.draw(rng, topology, rng.choice([0.3, 5.0, 12.5]), 1.0, 2.0)
        assert (start.action, stop.action) == ("start", "stop")
        assert (start.kind, start.target, start.seed, start.params) == (
            stop.kind,
            stop.target,
            stop.seed,
            stop.params,
        )
        assert menu.kind(start.kind).applies_to(topology)
        nemesis.check(start)


def test_a_step_of_another_package_is_refused():
    from nemesis.api import FaultStep
    from nemesis.errors import NemesisError

    with pytest.raises(NemesisError, match="the clock package cannot carry out a kill step"):
        MENUS["clock"].check_keys(FaultStep(0, "start", "kill", "one"))
