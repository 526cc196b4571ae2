"""Each package's menu: what a plan may draw from it, and what its check accepts, agree."""

from __future__ import annotations

import random

import pytest

from clusters.topology import TOPOLOGIES
from nemesis.errors import NemesisError
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


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("name", list(NEMESES))
def test_a_named_kind_and_target_are_drawn_as_named_and_pass_the_check(name, topology):
    from nemesis.api import TARGETS

    menu, nemesis = MENUS[name], build([name])[name]
    rng = random.Random(f"menus/named/{name}/{topology}")
    for kind in menu.kinds_for(topology):
        aimed = menu.kind_is_target or not menu.takes_target(kind.name)
        targets = [None] if aimed else [t for t in TARGETS if t not in kind.refuses]
        for target in kind.refuses:  # a kind's check refuses what its menu says it refuses
            start, _ = menu.draw(rng, topology, 5.0, 1.0, 2.0, (kind.name,), target)
            with pytest.raises(NemesisError, match=f"not '{target}'"):
                nemesis.check(start)
        for target in targets:
            start, stop = menu.draw(rng, topology, 5.0, 1.0, 2.0, (kind.name,), target)
            assert start.kind == stop.kind == kind.name
            assert start.target == stop.target
            if menu.kind_is_target:
                assert start.target == kind.name
            elif target is None:  # drawn as without a name: one of the menu's, or none
                assert start.target in (menu.targets or (None,))
                assert start.target not in kind.refuses
            else:
                assert start.target == target
            nemesis.check(start)


def test_a_single_named_kind_takes_no_draw_and_several_draw_among_themselves():
    menu = MENUS["clock"]
    a, b = random.Random(1), random.Random(1)
    menu.draw(a, "kraft", 5.0, 1.0, None, ("bump",), "all")
    b.getrandbits(32)  # the step's seed
    b.choice((-300, -30, -5, 5, 30, 300))  # delta_s
    assert a.random() == b.random()
    rng = random.Random(2)
    kinds = {menu.draw(rng, "kraft", 5.0, 1.0, None, ("bump", "strobe"))[0].kind for _ in range(50)}
    assert kinds == {"bump", "strobe"}


def test_the_kinds_that_read_a_named_target():
    assert [k for k in MENUS["partition"].kind_names() if MENUS["partition"].takes_target(k)] == [
        "isolate-one"
    ]
    assert not MENUS["clock"].takes_target("reset")
    assert all(MENUS["jvm"].takes_target(k) for k in MENUS["jvm"].kind_names())
    assert all(MENUS["packet"].takes_target(k) for k in MENUS["packet"].kind_names())
