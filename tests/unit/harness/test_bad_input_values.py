"""Issue 27, values: every numeric option finite and in its declared range, plans strict JSON,
subnets private IPv4, a campaign's seeds and cell timeout bounded, and ``--plan-only`` fast for
every value it accepts.

Each numeric option is found from its declaration (harness/spec.py OPTIONS), so an option added
later is walked too. A bad value is tried on the command line, in a YAML and a JSON spec file, as
a campaign's ``--set``, and in a replay plan's spec; each must end in exit 254 with one sentence
naming the option and its range, no traceback, and nothing written.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.errors import ClusterError
from clusters.topology import check_subnet
from harness.campaign.spec import MAX_CELL_TIMEOUT, MAX_SEEDS, expand
from harness.cli import main
from harness.plan import build_plan, load_plan
from harness.spec import MAX_FAULT_WINDOWS, MAX_TIME_LIMIT, OPTIONS, SpecError, spec_from_dict
from history.options import Option

BAD_INPUT = 254
NUMERIC = [o for o in OPTIONS if o.kind in (int, float)]
# Options given only with another option's value (--in-flight with --send-mode async).
NEEDS = {o.name: o.only_with for o in NUMERIC if o.only_with}
FEW = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Inputs here once hung or grew without bound: a hang fails the test (pytest-timeout), and
# how fast planning is belongs to a benchmark, never to a timed test.
pytestmark = pytest.mark.timeout(300)


def _context(o: Option) -> list[str]:
    need = NEEDS.get(o.name)
    return [f"--{need[0].replace('_', '-')}", str(need[1])] if need else []


def _spec_context(o: Option) -> dict[str, Any]:
    need = NEEDS.get(o.name)
    return {need[0]: need[1]} if need else {}


def bad_numbers(o: Option) -> st.SearchStrategy[float | int]:
    """Values outside ``o``'s range: not finite, huge, or past either end."""
    out: list[st.SearchStrategy[Any]] = [
        st.sampled_from([math.inf, -math.inf, math.nan, 1e300, -1e300])
    ]
    if o.minimum is not None:
        out.append(st.floats(max_value=float(o.minimum), exclude_max=True, allow_nan=False))
        out.append(st.integers(max_value=math.ceil(o.minimum) - 1))
    if o.maximum is not None:
        out.append(st.floats(min_value=float(o.maximum), exclude_min=True, allow_nan=False))
        out.append(st.integers(min_value=math.floor(o.maximum) + 1))
    return st.one_of(out)


def good_numbers(o: Option) -> st.SearchStrategy[float | int]:
    low = o.minimum if o.minimum is not None else 0
    high = o.maximum if o.maximum is not None else 10**6
    if o.kind is int:
        return st.integers(min_value=math.ceil(low), max_value=math.floor(high))
    return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def one_refusal(r, *words: str) -> str:
    """Exit 254, no traceback, the words in the error (rich may wrap it: words, not lines)."""
    assert r.exit_code == BAD_INPUT, r.output
    assert ("Traceback" not in r.output and r.exception is None) or isinstance(
        r.exception, SystemExit
    ), r.output
    flat = " ".join(r.output.split())
    for word in words:
        assert word in flat, (word, r.output)
    return flat


def test_every_numeric_option_declares_a_range_shown_in_help():
    assert NUMERIC, "no numeric options found"
    for o in NUMERIC:
        assert o.minimum is not None and o.maximum is not None, o.name
        assert o.minimum <= o.default <= o.maximum if o.default is not None else True, o.name
    help_text = " ".join(cli("run", "--help").output.split())
    for o in NUMERIC:
        assert f"--{o.flag}" in help_text
    assert "1<=x<=604800" in help_text


@pytest.mark.parametrize("o", NUMERIC, ids=lambda o: o.name)
@FEW
@given(data=st.data())
def test_a_bad_number_on_the_command_line_is_one_sentence(o, data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    value = data.draw(bad_numbers(o))
    text = repr(value) if isinstance(value, float) else str(value)
    r = cli("run", "--plan-only", "--seed", "1", *_context(o), f"--{o.flag}", text)
    flat = one_refusal(r, f"--{o.flag}", "must be a")
    assert "between" in flat or o.name == "zookeepers"
    assert list(tmp_path.iterdir()) == []


def _yaml_number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    return repr(value) if "e" not in repr(value) or "." in repr(value) else f"{value:.6e}"


def _json_number(value: float | int) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "1e400" if value > 0 else "-1e400"
    return json.dumps(value)


@pytest.mark.parametrize("o", NUMERIC, ids=lambda o: o.name)
@FEW
@given(data=st.data())
def test_a_bad_number_in_a_spec_file_is_one_sentence(o, data, tmp_path):
    value = data.draw(bad_numbers(o))
    context = _spec_context(o)
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text(
        "".join(f"{k}: {v}\n" for k, v in context.items()) + f"{o.name}: {_yaml_number(value)}\n"
    )
    json_file = tmp_path / "s.json"
    json_file.write_text(
        "{"
        + "".join(f'"{k}": "{v}", ' for k, v in context.items())
        + f'"{o.name}": {_json_number(value)}'
        + "}"
    )
    for path in (yaml_file, json_file):
        r = cli("run", "--plan-only", "--spec", str(path))
        one_refusal(r, f"--{o.flag}: ", str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "s.yaml"]


CAMPAIGN = "name: values\naxes:\n  workload: [queue]\nseeds: 1\n"


@pytest.mark.parametrize("o", NUMERIC, ids=lambda o: o.name)
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_bad_number_in_campaign_set_names_the_set(o, data, tmp_path):
    if o.name == "seed":
        return  # the campaign owns the seed: refused as such, whatever its value
    value = data.draw(bad_numbers(o))
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    sets = [a for k, v in _spec_context(o).items() for a in ("--set", f"{k}={v}")]
    r = cli("campaign", "--plan-only", str(spec), *sets, "--set", f"{o.name}={_yaml_number(value)}")
    one_refusal(r, f"--set {o.name}")
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


@pytest.mark.parametrize("text", ["[1", "{a: ", "'x", "a: b: c"])
def test_a_set_value_that_is_not_yaml_names_the_set(tmp_path, text):
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    r = cli("campaign", "--plan-only", str(spec), "--set", f"time_limit={text}")
    one_refusal(r, "--set time_limit=")


def test_a_number_yaml_reads_as_text_says_how_to_write_it(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    r = cli("campaign", "--plan-only", str(spec), "--set", "time_limit=1e3")
    one_refusal(r, "--set time_limit", "write 1000.0")


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("seeds", 100_000_000, f"between 1 and {MAX_SEEDS}"),
        ("seeds", 0, f"between 1 and {MAX_SEEDS}"),
        ("seeds", [-1], "seed -1 is not between 0"),
        ("seeds", [2**64], "is not between 0"),
        ("seeds", list(range(MAX_SEEDS + 1)), f"at most {MAX_SEEDS} seeds"),
        ("cell_timeout", math.nan, "cell_timeout must be a number of seconds between 1"),
        ("cell_timeout", math.inf, "cell_timeout must be"),
        ("cell_timeout", 1e-9, "cell_timeout must be"),
        ("cell_timeout", MAX_CELL_TIMEOUT + 1, "cell_timeout must be"),
        ("subnet", "8.8.8.0/24", "not a private IPv4 network"),
        ("subnet", "fd00::/120", "not a private IPv4 network"),
        ("subnet", "banana", "bad subnet 'banana'"),
    ],
)
def test_campaign_values_are_bounded(key, value, says):
    with pytest.raises(SpecError, match=re.escape(says)):
        expand({"axes": {"workload": ["queue"]}, key: value}, where="c")


def test_a_campaign_matrix_is_bounded_before_any_plan_is_built():
    axes = {"rate": list(range(1, 101)), "concurrency": list(range(1, 101))}
    with pytest.raises(SpecError, match="cells: at most"):
        expand({"axes": axes, "seeds": 2}, where="c")


# Replay plans.


def _stored(tmp_path: Path, **options: Any) -> dict[str, Any]:
    plan = build_plan(spec_from_dict({"nemesis": "partition,clock", **options}), 7)
    return json.loads(plan.to_json())


def _replay(tmp_path: Path, text: str):
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    (d / "plan.json").write_text(text)
    return cli("run", "--plan-only", "--replay", str(d))


@pytest.mark.parametrize("o", NUMERIC, ids=lambda o: o.name)
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_bad_number_in_a_replay_plan_spec_is_refused(o, data, tmp_path):
    value = data.draw(bad_numbers(o))
    plan = _stored(tmp_path, **_spec_context(o))
    plan["spec"][o.name] = "@@"
    text = json.dumps(plan).replace('"@@"', _json_number(value))
    r = _replay(tmp_path, text)
    flat = one_refusal(r, "plan.json")
    assert f"--{o.flag}: " in flat or "strict JSON" in flat


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_a_replay_plan_is_strict_json(tmp_path, constant):
    plan = _stored(tmp_path)
    plan["faults"][0]["at_s"] = "@@"
    r = _replay(tmp_path, json.dumps(plan).replace('"@@"', constant))
    one_refusal(r, "plan.json", "not strict JSON", "numbers must be finite")


def _edit(plan: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = plan
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        ("faults", 5, "faults must be a list"),
        ("faults.0", 5, "faults[0] must be a mapping with at_s"),
        ("faults.0.bogus", 1, "unknown: bogus"),
        ("faults.0.at_s", -50, "faults[0].at_s -50 must be between"),
        ("faults.0.at_s", 1e300, "faults[0].at_s"),
        ("faults.0.at_s", "soon", "must be a number of seconds"),
        ("faults.0.fault", "banana", "faults[0]: unknown nemesis 'banana'"),
        ("faults.0.kind", "banana", "faults[0]: unknown partition kind 'banana'"),
        ("faults.0.action", "explode", "action must be start or stop"),
        ("faults.0.params", [1], "params must be a mapping"),
        ("faults.0.seed", -1, "faults[0].seed must be a whole number"),
        ("seed", -1, "seed must be a whole number"),
        ("seed", 2**80, "seed must be a whole number"),
        ("seed", "abc", "seed must be a whole number"),
        ("seed", 8, "is not the spec's seed 7"),
        ("generator", "banana", "generator must be a mapping"),
        ("generator.concurrency", 10**9, "generator concurrency is 1000000000"),
        ("generator.rate", -5, "generator rate is -5"),
        ("spec", [1], "spec must be a mapping"),
        ("faultz", [], "unknown key(s) 'faultz'"),
    ],
)
def test_a_malformed_replay_plan_is_one_sentence_naming_the_part(tmp_path, path, value, says):
    plan = _stored(tmp_path)
    plan["faults"][0] = {**plan["faults"][0], "fault": "partition", "kind": "majority"}
    plan["faults"][0].pop("target", None)
    plan["faults"][0]["params"] = {}
    _edit(plan, path, value)
    r = _replay(tmp_path, json.dumps(plan))
    flat = one_refusal(r, "plan.json", says)
    assert "FaultStep" not in flat and "argument after" not in flat


def test_a_clock_step_with_parameters_its_menu_refuses_is_refused(tmp_path):
    plan = _stored(tmp_path)
    clock = next(i for i, s in enumerate(plan["faults"]) if s["fault"] == "clock")
    plan["faults"][clock]["kind"] = "strobe"
    plan["faults"][clock]["params"] = {"delta_s": 1, "period_s": 0, "duration_s": 1}
    one_refusal(_replay(tmp_path, json.dumps(plan)), "plan.json", f"faults[{clock}]", "period_s")


def test_a_plan_missing_a_part_says_which(tmp_path):
    plan = _stored(tmp_path)
    del plan["generator"]
    one_refusal(_replay(tmp_path, json.dumps(plan)), "plan.json", "the plan has no generator")


def test_a_valid_plan_still_replays_byte_for_byte(tmp_path):
    plan = build_plan(spec_from_dict({"nemesis": "partition,clock,kill", "time_limit": 120}), 3)
    r = _replay(tmp_path, plan.to_json())
    assert r.exit_code == 0, r.output
    assert r.output.endswith(plan.to_json())
    assert load_plan(tmp_path / "run").to_json() == plan.to_json()


# Accepted values: strict JSON, fast and bounded.


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"plan.json holds {constant}")

    return json.loads(text, parse_constant=refuse)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_accepted_numbers_make_a_strict_json_plan(data):
    # --disk-writeback applies only with a disk layer.
    values: dict[str, Any] = {"send_mode": "async", "nemesis": "partition", "disk_layer": "journal"}
    for o in NUMERIC:
        if o.name in ("zookeepers", "seed", "pollers", "replication", "min_insync_replicas"):
            continue
        applies = o.applies_with
        if applies is not None and applies[0] == "workload" and "queue" not in applies[1]:
            continue  # another workload's (the plan is a queue run's)
        values[o.name] = data.draw(good_numbers(o), label=o.name)
    # Pollers leave at least one producer slot (a combination, workloads/pipelined.py check).
    values["pollers"] = data.draw(st.integers(0, values["concurrency"] - 1), label="pollers")
    # The topic's replicas fit its brokers, and its min ISR its replicas (workloads/durability.py).
    values["replication"] = data.draw(st.integers(1, values["controllers"]), label="replication")
    values["min_insync_replicas"] = data.draw(
        st.integers(1, values["replication"]), label="min_insync_replicas"
    )
    quiet = values.get("nemesis_quiet")
    interval = values["nemesis_interval"]
    windows = values["time_limit"] / (interval + (interval if quiet is None else quiet))
    if windows > MAX_FAULT_WINDOWS:
        with pytest.raises(SpecError, match="fault windows: at most"):
            spec_from_dict(values)
        return
    plan = build_plan(spec_from_dict(values), data.draw(st.integers(0, 2**63 - 1)))
    _strict(plan.to_json())


def test_the_worst_accepted_plan_is_bounded():
    # How long it takes is bench/bench_plan_only.py's (never a timed test); here: it is
    # accepted, strict JSON, and of bounded size, for the largest values every option allows.
    interval = MAX_TIME_LIMIT / (2 * MAX_FAULT_WINDOWS)
    for topology in ("kraft-combined", "kraft", "zk", "migration"):
        zookeepers = ("--zookeepers", "3") if topology in ("zk", "migration") else ()
        r = cli(
            "run", "--plan-only", "--seed", str(2**63 - 1), "--topology", topology,
            *zookeepers, "--nemesis", "partition,kill,pause,clock,packet",
            "--time-limit", str(MAX_TIME_LIMIT), "--nemesis-interval", str(interval),
            "--concurrency", "256", "--rate", "100000", "--keys", "10000",
            "--send-mode", "async", "--in-flight", "1000000", "--linger-ms", "900000",
            "--batch-size", str(2**31 - 1), "--final-timeout", "86400",
        )  # fmt: skip
        assert r.exit_code == 0, r.output
        _strict(r.output.split("\n", 1)[1] if not r.output.startswith("{") else r.output)
        assert len(r.output) < 20_000_000


def test_too_many_fault_windows_are_refused_in_one_sentence():
    r = cli(
        "run", "--plan-only", "--nemesis", "partition", "--time-limit", str(MAX_TIME_LIMIT),
        "--nemesis-interval", "0.1",
    )  # fmt: skip
    one_refusal(r, "--nemesis-interval", "fault windows: at most 5,000")


# Subnets.

REFUSED_SUBNETS = [
    "8.8.8.0/24",
    "127.0.0.0/24",
    "fd00::/120",
    "fd00::/64",
    "0.0.0.0/0",
    "10.0.0.0/8",
    "224.0.0.0/24",
    "169.254.0.0/24",
    "100.64.0.0/24",
    "255.255.255.0/24",
    "172.17.0.0/24",
    "192.168.0.0/15",
]


@pytest.mark.parametrize("subnet", REFUSED_SUBNETS)
def test_a_subnet_outside_the_policy_is_refused_fast(subnet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("run", "--plan-only", "--subnet", subnet)
    one_refusal(r, "subnet")
    assert list(tmp_path.iterdir()) == []


def test_host_bits_say_how_to_write_the_network():
    with pytest.raises(ClusterError, match=re.escape("write 10.213.0.0/24")):
        check_subnet("10.213.0.1/24")


@settings(max_examples=60, deadline=None)
@given(address=st.integers(0, 2**32 - 1), prefix=st.integers(0, 32))
def test_subnet_policy_on_any_ipv4_network(address, prefix):
    import ipaddress

    net = ipaddress.IPv4Network((address, prefix), strict=False)
    private = any(
        net.subnet_of(ipaddress.IPv4Network(r))
        for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
    )
    ok = (
        private
        and not net.overlaps(ipaddress.IPv4Network("172.17.0.0/16"))
        and prefix >= 16
        and net.num_addresses - 2 >= 11 + 3
    )
    try:
        check_subnet(str(net), 3)
    except ClusterError as exc:
        assert not ok, exc
        assert str(net) in str(exc)
    else:
        assert ok


def test_campaign_slots_are_networks_of_the_policy():
    from harness.campaign.runner import slots

    camp = expand({"axes": {"workload": ["queue"]}, "subnet": "10.213.254.0/24"}, where="c")
    assert [s.subnet for s in slots(camp, 3)] == [
        "10.213.254.0/24",
        "10.213.255.0/24",
        "10.214.0.0/24",
    ]
    camp = expand({"axes": {"workload": ["queue"]}, "subnet": "192.168.255.0/24"}, where="c")
    with pytest.raises(SpecError, match=r"--parallel 2: .*outside the private ranges"):
        slots(camp, 2)


@pytest.mark.parametrize("version", ["３.９", "", "03.09", "3.9.", "3..9", "v3.9", "3.9.1.2"])
def test_a_version_is_ascii_digits(version):
    r = cli("run", "--plan-only", "--version", version)
    one_refusal(r, "is not a Kafka version")


@pytest.mark.parametrize(
    "args",
    [
        ["cluster", "up", "--brokers", "inf"],
        ["cluster", "up", "--brokers", "0"],
        ["cluster", "up", "--heap-mb", "-1"],
        ["cluster", "up", "--heap-mb", "nan"],
        ["cluster", "logs", "--tail", "-5"],
        ["hosts", "up", "--name", "x", "--count", "1e9"],
        ["hosts", "up", "--name", "x", "--count", "0"],
    ],
)
def test_cluster_and_hosts_numbers_are_bounded_before_docker(args, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    r = cli(*args)
    one_refusal(r, args[-2])
    assert "Docker is not running" not in r.output
