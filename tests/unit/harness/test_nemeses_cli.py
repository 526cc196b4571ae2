"""`kchaos nemeses` lists every package's menu, as text and as JSON, from the packages."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.cli import main
from nemesis.api import TARGETS
from nemesis.registry import MENUS, NEMESES


def test_json_lists_every_package_kind_and_parameter_with_range_and_meaning():
    result = CliRunner().invoke(main, ["nemeses", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [p["fault"] for p in data["packages"]] == list(NEMESES)
    for package in data["packages"]:
        menu = MENUS[package["fault"]]
        assert [k["kind"] for k in package["kinds"]] == list(menu.kind_names())
        assert package["meaning"] and package["targets"]
        named = {p["name"] for p in package["params"]}
        for kind in package["kinds"]:
            assert kind["meaning"]
            # Every key a kind reads has its meaning and range beside it, in its own package.
            assert set(kind["reads"]) <= named
            assert set(kind["plan_draws"]) <= set(kind["reads"])
        for param in package["params"]:
            assert param["meaning"] and param["accepts"]
    assert [t["target"] for t in data["targets"]] == list(TARGETS)
    assert all(t["meaning"] for t in data["targets"])
    clock = next(p for p in data["packages"] if p["fault"] == "clock")
    period = next(p for p in clock["params"] if p["name"] == "period_s")
    assert period["default"] == 2 and period["accepts"].startswith("2 to 3600")
    kill = next(p for p in data["packages"] if p["fault"] == "kill")
    zk_leader = next(k for k in kill["kinds"] if k["kind"] == "zk-leader")
    assert zk_leader["only_on"] == ["zk", "migration"]


def test_text_names_every_package_kind_target_and_parameter():
    result = CliRunner().invoke(main, ["nemeses"])
    assert result.exit_code == 0, result.output
    out = result.output
    for name, menu in MENUS.items():
        assert f"{name}: {menu.meaning}" in out
        for kind in menu.kinds:
            assert f"    {kind.name} " in out
        for param in menu.params:
            assert f"    {param.name} " in out and param.meaning in out
    for target in TARGETS:
        assert f"\n  {target} " in out
    assert "only on kraft, migration" in out  # controllers-brokers
    assert "plan: delta_s one of -300, -30, -5, 5, 30, 300" in out


def test_text_gives_the_item_syntax_and_what_each_package_and_kind_may_be_named():
    out = CliRunner().invoke(main, ["nemeses"]).output
    for form in ("package", "package:kind", "package:kind@target", "package@target"):
        assert f"\n  {form} " in out
    assert "e.g. --nemesis partition:isolate-active-controller,kill@active-controller" in out
    assert "  items: kill, kill:<kind>, kill@<kind> (the kind is the target)" in out
    assert "partition@<target> (@target for isolate-one)" in out
    assert "clock@<target> (@target for bump, strobe, restart-skewed)" in out
    # jvm kinds hook code some nodes do not run: the listing says which targets they take
    assert "@target: partition-leader only on kraft-combined; not zk-leader" in out
    assert "only on zk, migration" in out.split("targets (resolved")[1]


def test_json_says_which_targets_each_kind_takes_on_each_topology():
    from clusters.topology import TOPOLOGIES
    from nemesis.items import ItemError, parse_items

    data = json.loads(CliRunner().invoke(main, ["nemeses", "--json"]).output)
    assert data["items"]["example"] == (
        "partition:isolate-active-controller,kill@active-controller,clock:strobe"
    )
    for package in data["packages"]:
        for kind in package["kinds"]:
            for topology in TOPOLOGIES:
                for target in kind.get("targets_on", {}).get(topology, []):
                    parse_items([f"{package['fault']}:{kind['kind']}@{target}"], topology)
    jvm = next(p for p in data["packages"] if p["fault"] == "jvm")
    stall = next(k for k in jvm["kinds"] if k["kind"] == "controller-stall")
    assert "partition-leader" not in stall["targets_on"]["kraft"]
    with pytest.raises(ItemError):
        parse_items(["jvm:controller-stall@partition-leader"], "kraft")
    zk_leader = next(t for t in data["targets"] if t["target"] == "zk-leader")
    assert zk_leader["only_on"] == ["zk", "migration"]


def test_the_choreographies_are_listed_with_their_moves():
    from nemesis.choreo import CHOREOGRAPHIES

    data = json.loads(CliRunner().invoke(main, ["nemeses", "--json"]).output)
    listed = {c["choreography"]: c for c in data["choreographies"]}
    assert sorted(listed) == sorted(CHOREOGRAPHIES)
    pause = listed["last-replica-pause"]
    assert pause["packages"] == ["pause", "disk"]
    assert [m["step"] for m in pause["moves"]][-1] == "stop-pause"
    out = CliRunner().invoke(main, ["nemeses"]).output
    for name, c in CHOREOGRAPHIES.items():
        assert f"    {name} " in out and c.meaning in out
    assert "items: choreo, choreo:<name>" in out
