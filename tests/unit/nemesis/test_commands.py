"""The exact rules and commands the packages would run, checked without a node."""

import pytest

from nemesis.clock import ENV_TEXT, offset_text
from nemesis.errors import NemesisError
from nemesis.iptables import restore_text
from nemesis.packet import loss_rules, netem_args
from nemesis.partition import chain_rules


def test_partition_rules_drop_only_the_named_node_addresses():
    rules = chain_rules(["10.0.0.13", "10.0.0.12"])
    assert rules == ["-A KCHAOS -s 10.0.0.12/32 -j DROP", "-A KCHAOS -s 10.0.0.13/32 -j DROP"]
    text = restore_text("KCHAOS", rules)
    assert text.startswith("*filter\n:KCHAOS - [0:0]\n") and text.endswith("COMMIT\n")


def test_netem_arguments_per_kind():
    assert netem_args("delay", {"delay_ms": 50, "jitter_ms": 5}) == ["delay", "50ms", "5ms"]
    assert netem_args("reorder", {"percent": 25}) == ["delay", "100ms", "reorder", "25%", "50%"]
    with pytest.raises(NemesisError, match="unknown packet kind"):
        netem_args("corrupt", {})


def test_loss_rules_use_a_probability_and_refuse_nonsense():
    assert loss_rules(["10.0.0.12"], 30) == [
        "-A KCHAOS-PKT -s 10.0.0.12/32 -m statistic --mode random --probability 0.3000 -j DROP"
    ]
    with pytest.raises(NemesisError, match="percent"):
        loss_rules(["10.0.0.12"], 0)


def test_faketime_env_keeps_monotonic_time_real_and_offsets_are_relative():
    assert "FAKETIME_DONT_FAKE_MONOTONIC=1" in ENV_TEXT and "LD_PRELOAD=" in ENV_TEXT
    # Without it libfaketime turns the JVM's monotonic timed waits into spins (docs/nemesis.md).
    assert "FAKETIME_FORCE_MONOTONIC_FIX=0" in ENV_TEXT
    assert offset_text(30) == "+30\n" and offset_text(-2.5) == "-2.5\n" and offset_text(0) == "+0\n"


def test_bad_parameters_are_named_in_a_clear_error():
    from clusters.topology import build_topology
    from nemesis.api import FaultContext, FaultStep
    from nemesis.clock import ClockNemesis

    with pytest.raises(NemesisError, match="delay_ms must be a number, got 'soon'"):
        netem_args("delay", {"delay_ms": "soon"})
    ctx = FaultContext(topology=build_topology("kraft-combined", cluster="x"), nodes={})
    # 1 s equals libfaketime's re-read interval: the JVM could see the same phase every time.
    for period in (0.2, 1):
        strobe = FaultStep(0, "start", "clock", "strobe", "one", params={"period_s": period})
        with pytest.raises(NemesisError, match="at least 2 s"):
            ClockNemesis().start(ctx, strobe)


@pytest.mark.parametrize(
    ("fault", "kind", "params", "expected"),
    [
        ("clock", "strobe", {"delta_ms": 50}, "does not read delta_ms: it takes delta_s, "),
        ("clock", "bump", {"period_s": 2}, "does not read period_s: it takes delta_s"),
        ("kill", "one", {"delta_s": 5}, "it takes no parameters"),
        ("packet", "loss", {"delay_ms": 5}, "it takes percent"),
        ("packet", "duplicate", {"percent": 0}, "percent must be in (0, 100]"),
        ("partition", "flood", {}, "unknown partition kind 'flood'"),
        ("clock", "strobe", {"duration_s": 0}, "duration_s must be positive"),
    ],
)
def test_a_parameter_the_kind_does_not_read_is_refused(fault, kind, params, expected):
    from nemesis.api import FaultStep
    from nemesis.registry import build

    step = FaultStep(0, "start", fault, kind, "one", params=params)
    with pytest.raises(NemesisError) as err:
        build([fault])[fault].check(step)
    assert expected in str(err.value)


def test_partition_leader_steps_may_name_their_partition():
    from nemesis.api import FaultStep
    from nemesis.registry import build

    kill = FaultStep(0, "start", "kill", "partition-leader", params={"partition": "t-0"})
    clock = FaultStep(0, "start", "clock", "bump", "partition-leader", params={"partition": "t-0"})
    assert build(["kill"])["kill"].check(kill) == {}
    assert build(["clock"])["clock"].check(clock) == {"delta_s": 60}
