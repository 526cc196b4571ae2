"""Pipelined share producers (`--workload share --send-mode async`): the queue's pipelined
sends recorded in the Java client's JVM, paced, beside the share consumers, which keep their
slots when a producer slot owns many process ids."""

from __future__ import annotations

import random
from typing import Any

import pytest
from click.testing import CliRunner

from clusters.topology import build_topology
from harness.cli import main
from harness.plan import build_plan
from harness.spec import RunSpec, validate
from history.format import JVM_RECORDER
from workloads.pipelined import ASYNC_VALUE_STRIDE
from workloads.share import ShareConsumer, ShareProducer, ShareWorkload


def _plan_only(*args: str) -> Any:
    return CliRunner().invoke(
        main, ["run", "--workload", "share", "--version", "4.4", "--plan-only", *args]
    )


def _gen(**options: Any) -> dict[str, Any]:
    spec = validate(RunSpec.of(workload="share", **{"version": "4.4", **options}))
    return build_plan(spec, 1).generator


def test_async_share_producers_are_recorded_in_the_jvm_and_paced():
    got = _plan_only("--send-mode", "async", "--in-flight", "8")
    assert got.exit_code == 0, got.output
    assert '"rate": 50.0' in got.output  # its consumers must keep up: not unpaced
    gen = _gen(send_mode="async", in_flight=8)
    assert gen["send_mode"] == "async" and gen["in_flight"] == 8
    assert gen["send_recorder"] == JVM_RECORDER
    assert gen["value_stride"] == ASYNC_VALUE_STRIDE
    assert ShareWorkload.lanes(gen) == 8
    header = ShareWorkload.history_header(gen)
    assert header["send_mode"] == "async" and header["in_flight"] == 8
    assert header["send_recorder"] == JVM_RECORDER and header["share"]["group"]


def test_a_sync_share_run_plans_as_before():
    gen = _gen()
    assert "send_mode" not in gen and "send_recorder" not in gen
    assert ShareWorkload.lanes(gen) == 1
    assert "send_mode" not in ShareWorkload.history_header(gen)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--send-mode", "async", "--pollers", "1"], "a share run's consumers are its"),
        (
            ["--send-mode", "async", "--send-recorder", "harness"],
            "record their sends in the Java client's JVM",
        ),
    ],
)
def test_what_share_producers_cannot_do_is_refused_in_one_line(args, says):
    got = _plan_only(*args)
    assert got.exit_code != 0
    lines = [line for line in got.output.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], got.output


def test_another_workload_still_refuses_async_sends():
    got = CliRunner().invoke(main, ["run", "--workload", "admin", "--send-mode", "async"])
    assert got.exit_code != 0
    assert "an option of the queue and share workloads, not of 'admin'" in got.output


class _Host:
    def handle(self, listener: Any = None) -> int:
        return 1


@pytest.mark.parametrize("in_flight", [None, 8])
def test_each_slots_processes_keep_their_role_with_lanes(in_flight):
    options = {"concurrency": 5, "share_consumers": 2}
    if in_flight:
        options.update(send_mode="async", in_flight=in_flight)
    gen = {**_gen(**options), "concurrency": 5}
    wl = ShareWorkload(gen, build_topology("kraft-combined", cluster="x"), 1, "r1")
    wl.java = _Host()  # type: ignore[assignment]
    lanes = in_flight or 1
    for slot in range(5):
        # A slot's first process, and the one it goes on as after two retirements.
        for process in (slot * lanes, slot * lanes + 2 * 5 * lanes):
            client = wl.client(process, random.Random(0))
            want = ShareConsumer if slot >= 3 else ShareProducer
            assert isinstance(client, want), (slot, process)
    assert wl.pipelined_lanes() == (in_flight or 0)
    assert ("in_flight" in wl.hints()) is bool(in_flight)
