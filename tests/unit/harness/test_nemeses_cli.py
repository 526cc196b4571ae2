"""`kchaos nemeses` lists every package's menu, as text and as JSON, from the packages."""

from __future__ import annotations

import json

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
    assert period["default"] == 2 and period["accepts"].startswith(">= 2")
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
