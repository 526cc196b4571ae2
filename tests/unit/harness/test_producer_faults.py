"""Producer-state faults as a spec names them: items, plan-only refusals, `kchaos nemeses`, and
the in-flight counts the busiest-leader target reads."""

from __future__ import annotations

import json

from click.testing import CliRunner

from harness.cli import main
from harness.nemesis_items import named_selectors, parse_items
from workloads.pipelined import InFlight


def run(*args: str):
    return CliRunner().invoke(main, ["run", *args])


def flat(result) -> str:
    return " ".join(result.output.split())


def test_kill_and_partition_items_take_the_new_targets():
    items = parse_items(
        ["kill@busiest-leader", "partition:isolate-one@busiest-leader", "kill:txn-coordinator"],
        "kraft-combined",
    )
    assert [(i.package, i.kinds, i.target) for i in items] == [
        ("kill", ("busiest-leader",), None),
        ("partition", ("isolate-one",), "busiest-leader"),
        ("kill", ("txn-coordinator",), None),
    ]
    assert named_selectors(["kill@txn-coordinator", "partition:isolate-one@one"]) == {
        "txn-coordinator",
        "isolate-one",
        "one",
    }


def test_txn_coordinator_without_txn_is_refused_at_plan_only_in_one_sentence():
    for item in ("kill@txn-coordinator", "partition:isolate-one@txn-coordinator"):
        result = run("--nemesis", item, "--plan-only")
        assert result.exit_code != 0
        assert "target txn-coordinator needs transactions: add --txn" in flat(result)


def test_plan_only_names_the_targets_in_the_steps():
    result = run("--txn", "--nemesis", "kill@txn-coordinator", "--plan-only")
    assert result.exit_code == 0, result.output
    assert '"kind": "txn-coordinator"' in result.output
    result = run(
        "--send-mode", "async", "--rate", "0", "--nemesis", "kill@busiest-leader", "--plan-only"
    )
    assert result.exit_code == 0, result.output
    assert '"kind": "busiest-leader"' in result.output


def test_nemeses_lists_the_new_targets_as_named_only():
    data = json.loads(CliRunner().invoke(main, ["nemeses", "--json"]).output)
    targets = {t["target"]: t["meaning"] for t in data["targets"]}
    assert "in flight" in targets["busiest-leader"]
    assert "__transaction_state" in targets["txn-coordinator"]
    kill = next(p for p in data["packages"] if p["fault"] == "kill")
    drawn = {k["kind"]: k.get("drawn", True) for k in kill["kinds"]}
    assert drawn["busiest-leader"] is False and drawn["txn-coordinator"] is False
    assert drawn["one"] is True
    text = CliRunner().invoke(main, ["nemeses"]).output
    assert "a bare package never draws it" in text


def test_in_flight_sums_every_live_producers_row():
    counts = InFlight(3)
    a, b = counts.register(0), counts.register(1)
    a[1] += 2
    b[1] += 1
    b[2] += 4
    b[2] -= 4
    assert counts.by_partition() == {1: 3}
    counts.unregister(1)
    assert counts.by_partition() == {1: 2}
    counts.unregister(0)
    assert counts.by_partition() == {}
