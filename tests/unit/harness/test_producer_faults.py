"""Producer-state faults as a spec names them: items, plan-only refusals, `kchaos nemeses`, and
the in-flight counts the busiest-leader target reads."""

from __future__ import annotations

import json

from click.testing import CliRunner

from harness.cli import main
from nemesis.items import named_selectors, parse_items
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


def test_a_pipelined_producer_counts_its_sends_until_their_delivery_reports(tmp_path):
    """librdkafka's in-process mock cluster: counted from produce() to the delivery report."""
    import random
    import time
    from types import SimpleNamespace

    from workloads.pipelined import PipelinedProducer

    acked: list[tuple[int, int | None, int]] = []
    wl = SimpleNamespace(
        keys=4,
        topic="kchaos-queue",
        gen={"value_stride": 1_000_000_000},
        leaders=SimpleNamespace(leaders={}),
        sends_in_flight=InFlight(4),
        note_acked=lambda key, offset, value: acked.append((key, offset, value)),
    )
    conf = {
        "test.mock.num.brokers": 3,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 500,  # held in the producer: still in flight when counted
        "message.timeout.ms": 5000,
    }
    producer = PipelinedProducer(wl, 3, random.Random(1), conf)  # type: ignore[arg-type]
    done: list[str] = []
    ops = [producer.next_op() for _ in range(20)]
    for op in ops:
        assert producer.send(op, lambda c: done.append(c.type)) is None
    by_key: dict[int, int] = {}
    for op in ops:
        by_key[op.value[0][1]] = by_key.get(op.value[0][1], 0) + 1
    assert wl.sends_in_flight.by_partition() == by_key
    deadline = time.monotonic() + 10
    while len(done) < 20 and time.monotonic() < deadline:
        producer.poll(0.05)
    assert done == ["ok"] * 20 and wl.sends_in_flight.by_partition() == {}
    producer.close()


def test_a_spec_file_or_campaign_cell_is_refused_the_same_way():
    import pytest

    from harness.spec import SpecError, spec_from_dict

    with pytest.raises(SpecError, match="cell a: target txn-coordinator needs transactions"):
        spec_from_dict({"nemesis": ["kill@txn-coordinator"]}, where="cell a")
    spec = spec_from_dict({"nemesis": ["kill@txn-coordinator"], "txn": True})
    assert spec.nemesis == ["kill@txn-coordinator"]
