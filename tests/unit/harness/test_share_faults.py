"""Share-group faults as a spec names them: items, plan-only refusals outside a share run, and
`kchaos nemeses`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.spec import SpecError, spec_from_dict
from nemesis.items import parse_items


def run(*args: str):
    return CliRunner().invoke(main, ["run", *args])


def flat(result) -> str:
    return " ".join(result.output.split())


def test_kill_pause_and_partition_items_take_the_share_targets():
    items = parse_items(
        ["kill@share-coordinator", "pause@share-leader", "partition:isolate-one@share-leader"],
        "kraft-combined",
    )
    assert [(i.package, i.kinds, i.target) for i in items] == [
        ("kill", ("share-coordinator",), None),
        ("pause", ("share-leader",), None),
        ("partition", ("isolate-one",), "share-leader"),
    ]


@pytest.mark.parametrize("item", ["kill@share-leader", "partition:isolate-one@share-coordinator"])
def test_a_share_target_outside_a_share_run_is_refused_in_one_sentence(item):
    result = run("--nemesis", item, "--plan-only")
    assert result.exit_code != 0
    assert "needs a share group: add --workload share" in flat(result)
    assert "Traceback" not in result.output
    with pytest.raises(SpecError, match=r"cell a: target .* needs a share group"):
        spec_from_dict({"nemesis": [item]}, where="cell a")


def test_a_share_run_plans_the_share_targets_as_named():
    result = run(
        "--workload",
        "share",
        "--version",
        "4.4.0",
        "--nemesis",
        "kill@share-coordinator,pause@share-leader",
        "--time-limit",
        "40",
        "--plan-only",
    )
    assert result.exit_code == 0, result.output
    assert '"kind": "share-coordinator"' in result.output
    assert '"kind": "share-leader"' in result.output


def test_nemeses_lists_the_share_targets_as_named_only():
    data = json.loads(CliRunner().invoke(main, ["nemeses", "--json"]).output)
    targets = {t["target"]: t["meaning"] for t in data["targets"]}
    assert "__share_group_state" in targets["share-coordinator"]
    assert "share-partition leader" in targets["share-leader"]
    kill = next(p for p in data["packages"] if p["fault"] == "kill")
    drawn = {k["kind"]: k.get("drawn", True) for k in kill["kinds"]}
    assert drawn["share-leader"] is False and drawn["share-coordinator"] is False
