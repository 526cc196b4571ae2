"""``--nemesis`` items: package, package:kind, package:kind@target, package@target.

Every item the menus allow parses and is recorded as given; a plan drawn from items holds only
the named kinds and targets, each step passes its package's check, and each item gets a fault
window before any gets a second. Everything else is one sentence naming the valid choices.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.topology import TOPOLOGIES
from harness.plan import build_plan, fault_turns, fault_windows, load_plan
from harness.spec import RunSpec, SpecError, spec_from_dict, validate
from nemesis.api import TARGETS
from nemesis.items import ItemError, packages, parse_items, split
from nemesis.registry import MENUS, build


def _candidates() -> list[str]:
    """Every spelling an item could have, valid or not, from the menus and the selectors."""
    out = []
    for package, menu in MENUS.items():
        out.append(package)
        out += [f"{package}@{t}" for t in TARGETS]
        for kind in menu.kind_names():
            out.append(f"{package}:{kind}")
            out += [f"{package}:{kind}@{t}" for t in TARGETS]
    return out


CANDIDATES = _candidates()


def _accepted(topology: str) -> list[str]:
    ok = []
    for text in CANDIDATES:
        try:
            parse_items([text], topology)
        except ItemError:
            continue
        ok.append(text)
    return ok


ACCEPTED = {t: _accepted(t) for t in TOPOLOGIES}
NEMESES = build(sorted(MENUS))


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_every_package_and_every_kind_of_the_topology_is_an_item(topology):
    ok = set(ACCEPTED[topology])
    for package, menu in MENUS.items():
        assert package in ok
        for kind in menu.kinds:
            assert (f"{package}:{kind.name}" in ok) == kind.applies_to(topology), kind.name
            if menu.kind_is_target:
                # kill@active-controller is the kind active-controller
                assert (f"{package}@{kind.name}" in ok) == kind.applies_to(topology)


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_named_target_is_refused_where_the_kind_reads_none(topology):
    for text in ACCEPTED[topology]:
        package, kind, target = split(text)
        menu = MENUS[package]
        if kind is not None and target is not None:
            assert menu.takes_target(kind), text
            if menu.kind_is_target:
                assert kind == target
    assert "partition:bridge@one" not in ACCEPTED[topology]
    assert "clock:reset@all" not in ACCEPTED[topology]
    assert "partition:isolate-one@active-controller" in ACCEPTED[topology]


def test_role_targets_apply_where_the_topology_has_the_role():
    assert "clock:bump@zk-leader" in ACCEPTED["zk"]
    assert "clock:bump@zk-leader" not in ACCEPTED["kraft"]
    assert "kill@quorum-leader" not in ACCEPTED["zk"]
    # jvm kinds hook code only some nodes run: a ZooKeeper none, controller-stall a controller
    assert not any(t.startswith("jvm") and t.endswith("@zk-leader") for t in ACCEPTED["migration"])
    assert "jvm:controller-stall@partition-leader" not in ACCEPTED["kraft"]
    assert "jvm:controller-stall@partition-leader" in ACCEPTED["kraft-combined"]
    assert "jvm:controller-stall@active-controller" in ACCEPTED["kraft"]


@pytest.mark.parametrize("text", CANDIDATES)
def test_an_item_splits_back_into_its_text(text):
    package, kind, target = split(text)
    rebuilt = package + (f":{kind}" if kind else "") + (f"@{target}" if target else "")
    assert rebuilt == text


def _matches(step, item) -> bool:
    return (
        step.fault == item.package
        and (item.kinds is None or step.kind in item.kinds)
        and (item.target is None or step.target == item.target)
    )


@st.composite
def targeted_specs(draw):
    topology = draw(st.sampled_from(TOPOLOGIES))
    items = draw(st.lists(st.sampled_from(ACCEPTED[topology]), min_size=1, max_size=6))
    # Items that mean the same thing twice are refused (tested below); keep one of each.
    kept, keys = [], set()
    for text in items:
        key = parse_items([text], topology)[0].key
        if key not in keys:
            kept.append(text)
            keys.add(key)
    return RunSpec(
        topology=topology,
        # --zookeepers applies to the ZooKeeper topologies only (refused elsewhere).
        zookeepers=draw(st.sampled_from([1, 3])) if topology in ("zk", "migration") else 1,
        nemesis=kept,
        time_limit=draw(st.floats(min_value=1, max_value=400)),
        nemesis_interval=draw(st.floats(min_value=0.5, max_value=30)),
    )


seeds = st.integers(min_value=0, max_value=2**63 - 1)


@settings(max_examples=300)
@given(targeted_specs(), seeds)
def test_a_plan_draws_only_what_was_named_and_each_package_accepts_it(spec, seed):
    validate(spec)
    plan = build_plan(spec, seed)
    items = parse_items(spec.nemesis, spec.topology, spec.zookeepers)
    starts = plan.faults[::2]
    for step in plan.faults:
        assert any(_matches(step, i) for i in items), step
        assert MENUS[step.fault].kind(step.kind).applies_to(spec.topology)
        NEMESES[step.fault].check(step)
    assert len(starts) == len(fault_windows(spec))
    # plan.json records the items as given, and a stored plan loads back to the same bytes
    data = json.loads(plan.to_json())
    assert data["spec"]["nemesis"] == spec.nemesis
    assert build_plan(RunSpec.of(**data["spec"]), seed).to_json() == plan.to_json()


@settings(max_examples=300)
@given(targeted_specs(), seeds)
def test_every_item_has_a_window_before_any_has_a_second(spec, seed):
    steps, turns = fault_turns(spec, random.Random(f"kchaos/{seed}/plan"))
    n, windows = len(spec.nemesis), len(fault_windows(spec))
    assert len(turns) == windows
    for start in range(0, windows, n):
        one_round = [i.text for i in turns[start : start + n]]
        assert len(set(one_round)) == len(one_round)
    if windows >= n:
        assert {i.text for i in turns} == set(spec.nemesis)
        assert build_plan(spec, seed).notes == []
    else:
        note = build_plan(spec, seed).notes[0]
        missed = set(spec.nemesis) - {i.text for i in turns}
        assert missed and all(m in note for m in missed)
    for item, start in zip(turns, steps[::2] if steps else [], strict=False):
        assert _matches(start, item)


def test_the_demo_draws_a_partition_and_a_kill():
    # make demo: 40 s, faults every 8 s; before, seed-dependent, it could draw two kills
    for seed in range(50):
        spec = validate(
            RunSpec.of(nemesis=["partition", "kill"], time_limit=40, nemesis_interval=8)
        )
        assert sorted(s.fault for s in build_plan(spec, seed).faults[::2]) == ["kill", "partition"]


def test_a_single_kind_plan_holds_only_that_kind():
    spec = validate(RunSpec.of(nemesis=["partition:isolate-active-controller"], time_limit=120))
    faults = build_plan(spec, 7).faults
    assert faults and {(s.fault, s.kind) for s in faults} == {
        ("partition", "isolate-active-controller")
    }


def test_a_named_target_fixes_the_target_and_kill_at_a_selector_is_that_kind():
    spec = validate(
        RunSpec(
            nemesis=["kill@active-controller", "clock:strobe@majority", "jvm@one"],
            time_limit=200,
            nemesis_interval=5,
        )
    )
    seen = {(s.fault, s.kind, s.target) for s in build_plan(spec, 3).faults}
    assert ("kill", "active-controller", "active-controller") in seen
    assert ("clock", "strobe", "majority") in seen
    assert {s[2] for s in seen if s[0] == "jvm"} == {"one"}


def test_a_short_time_limit_says_which_items_got_no_window_and_what_fits():
    spec = validate(RunSpec.of(nemesis=["partition", "kill", "pause", "clock"], time_limit=60))
    plan = build_plan(spec, 42)
    assert len(plan.faults[::2]) == 3
    (note,) = plan.notes
    assert "has 3 fault windows for 4 nemesis items" in note
    assert "--time-limit 80 fits them all" in note
    drawn = {s.fault for s in plan.faults}
    missed = next(p for p in spec.nemesis if p not in drawn)
    assert f"{missed} got none" in note
    assert "notes" not in json.loads(plan.to_json())


def test_the_items_packages_are_what_a_run_builds():
    assert packages(["kill@one", "partition:bridge", "kill:all", "clock"]) == [
        "kill",
        "partition",
        "clock",
    ]


@pytest.mark.parametrize(
    ("nemesis", "topology", "expected"),
    [
        (
            "partition:isolate-leader",
            "kraft-combined",
            "partition has no kind 'isolate-leader': its kinds on kraft-combined are "
            "random-halves, isolate-one, majority-minority, majorities-ring, bridge, "
            "isolate-active-controller",
        ),
        (
            "partition:controllers-brokers",
            "kraft-combined",
            "partition kind 'controllers-brokers' is only for kraft, migration",
        ),
        ("kill@zk-leader", "kraft", "kill target 'zk-leader' is only for zk, migration"),
        ("kill@leader", "kraft", "kill has no target 'leader': its targets (its kinds) on kraft"),
        ("kill:one@all", "kraft", "write kill@all or kill:one"),
        ("partition:bridge@one", "kraft", "the partition kinds that do on kraft are isolate-one"),
        ("clock:reset@one", "zk", "clock kind 'reset' takes no target"),
        ("clock@leader", "zk", "'leader' is no target: clock takes one, minority"),
        (
            "jvm:controller-stall@partition-leader",
            "kraft",
            "names no node jvm controller-stall acts on",
        ),
        (
            "flood",
            "kraft",
            "unknown nemesis 'flood': valid nemeses are client, clock, disk, jvm, kill",
        ),
        ("partition:", "kraft", "is not package, package:kind, package:kind@target"),
        ("kill,kill", "kraft", "names kill twice"),
        ("kill:one,kill@one", "kraft", "names kill@one twice (as kill:one and kill@one)"),
    ],
)
def test_an_item_the_menus_do_not_allow_is_one_sentence_naming_the_valid_ones(
    nemesis, topology, expected
):
    with pytest.raises(SpecError) as err:
        spec_from_dict({"nemesis": nemesis, "topology": topology})
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_a_spec_file_may_list_items(tmp_path):
    spec = spec_from_dict({"nemesis": ["partition:isolate-one@majority", "kill@one"]})
    assert spec.nemesis == ["partition:isolate-one@majority", "kill@one"]
    path = tmp_path / "plan.json"
    path.write_text(build_plan(spec, 5).to_json())
    assert load_plan(path).to_json() == path.read_text()


def test_a_kind_is_aimed_only_where_its_menu_says_it_can_act(monkeypatch):
    # Asked of the menu, never of the package's name: a packet menu that acts on ZooKeepers
    # only is offered the selectors that can name one (nemesis/targets.py could_name).
    from dataclasses import replace

    import nemesis.items as items

    only_zk = replace(MENUS["packet"], acts_on=lambda kind, node, topo: node.is_zookeeper)
    monkeypatch.setitem(items.MENUS, "packet", only_zk)
    kind = only_zk.kinds[0].name
    assert items.targets_on("packet", kind, "kraft") == []
    on_zk = items.targets_on("packet", kind, "zk")
    assert {"one", "all", "zk-leader"} <= set(on_zk)
    assert not {"partition-leader", "active-controller"} & set(on_zk)
