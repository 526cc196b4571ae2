"""Issue 27, the items left after the first pass: --spark-master, setup's versions, strict JSON
everywhere kchaos writes, bounded clock and feature parameters, SSH inventories checked before
connecting, campaigns that remove only clusters they made, and one prefix for every option's
refusal.

Each refusal is one line on stderr naming the option, exit 254, never a traceback; nothing is
started (no Spark, no apt, no dockerd, no Docker engine, no SSH).
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.scan.spark_session import master_problem
from harness.exit_codes import BAD_INPUT_EXIT
from tests.unit.harness.test_bad_input_cli import kchaos, one_error_line

SETTINGS = settings(max_examples=40, deadline=None)


# -- --spark-master, checked before any work (check, analyze) ----------------------------------

GOOD_MASTERS = [
    "local",
    "local[1]",
    "local[8]",
    "local[*]",
    "local[*,3]",
    "local[4,2]",
    "yarn",
    "spark://127.0.0.1:7077",
    "spark://spark-master.example:7077",
    "spark://a:7077,b:7077",
    "spark://[::1]:7077",
    "k8s://https://10.0.0.1:6443",
    "k8s://10.0.0.1:6443",
    "sc://127.0.0.1:15002",
    "sc://connect.example",
    "sc://h:15002/;token=abc",
]
BAD_MASTERS = [
    "",
    "loc",
    "local[0]",
    "local[",
    "local[2",
    "local[-1]",
    "local[two]",
    "spark://",
    "spark://host",
    "spark://host:0",
    "spark://host:65536",
    "spark://host:7077,",
    "k8s://",
    "sc://",
    "sc://:15002",
    "sc://h:99999",
    "mesos://h:5050",
    "yarn-client",
    "http://h:7077",
]


@pytest.mark.parametrize("master", GOOD_MASTERS)
def test_spark_master_forms_are_accepted(master: str):
    assert master_problem(master) is None


@pytest.mark.parametrize("master", BAD_MASTERS)
def test_a_bad_spark_master_names_the_option(master: str):
    problem = master_problem(master)
    assert problem and problem.startswith("--spark-master ")


@SETTINGS
@given(st.text(string.printable, max_size=30).filter(lambda s: master_problem(s) is not None))
def test_check_refuses_a_bad_spark_master_before_reading_anything(master: str):
    # The history does not exist: the master is refused first, so the message is about it.
    r = kchaos("check", "/nonexistent/run", "--spark-master", master)
    assert one_error_line(r) == f"kchaos check: {master_problem(master)}"


@pytest.mark.parametrize("master", BAD_MASTERS)
def test_analyze_refuses_a_bad_spark_master_before_starting_spark(master: str, tmp_path):
    r = kchaos("analyze", str(tmp_path), "--spark-master", master)
    assert one_error_line(r, "--spark-master") == master_problem(master)


@pytest.mark.parametrize("command", ["check", "analyze"])
def test_spark_master_help_names_the_forms(command: str):
    r = kchaos(command, "--help")
    text = " ".join(r.stdout.split())
    for form in ("local[N]", "local[*]", "spark://HOST:PORT", "yarn", "k8s://", "sc://"):
        assert form in text, (form, text)


# -- kchaos setup --version: every version checked before apt or dockerd -----------------------


def _nothing_starts(monkeypatch):
    import clusters.setup

    def started(*a, **k):
        raise AssertionError("setup touched packages or the engine before checking its versions")

    monkeypatch.setattr(clusters.setup, "ensure_packages", started)
    monkeypatch.setattr(clusters.setup, "ensure_engine", started)


@SETTINGS
@given(
    bad=st.one_of(
        st.sampled_from(["banana", "", "3.", "3.9.x", "03.9", "３.９", "2.8", "1", "3.2.1"]),
        st.sampled_from(["v3.9", "3\n9", "3.9\n", "3.9 "]),
        st.text(string.printable, max_size=12).filter(
            lambda s: not all(p.isdigit() for p in s.split("."))
        ),
    ),
    before=st.lists(st.sampled_from(["3.9", "4.0", "3.9.1", "4.4"]), max_size=2),
)
def test_setup_checks_every_version_before_installing_anything(bad, before):
    import clusters.setup

    with pytest.MonkeyPatch.context() as mp:
        _nothing_starts(mp)
        args = [a for v in [*before, bad] for a in ("--version", v)]
        r = kchaos("setup", *args)
    assert clusters.setup.ensure_packages.__name__ == "ensure_packages"  # restored
    one_error_line(r, "--version:")


# -- strict JSON everywhere kchaos writes ------------------------------------------------------

_JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5)
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


def _strict_loads(text: str):
    import json

    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@SETTINGS
@given(_JSON)
def test_every_json_kchaos_writes_is_strict(value):
    from history import strict_json

    for text in (strict_json.dumps(value, indent=1), strict_json.encoder()(value)):
        _strict_loads(text)
    assert _strict_loads(strict_json.dumps(value)) == _strict_loads(
        strict_json.dumps(strict_json.finite(value))
    )


def test_a_computed_nan_is_written_as_null_not_a_failed_write(tmp_path):
    from harness.run.rundir import write_json
    from history.writer import HistoryWriter

    write_json(tmp_path / "run.json", {"rate": float("nan"), "took": [float("inf"), 1.5]})
    assert _strict_loads((tmp_path / "run.json").read_text()) == {"rate": None, "took": [None, 1.5]}
    with HistoryWriter(tmp_path / "history.jsonl", run="r") as w:
        w.append({"type": "invoke", "f": "send", "process": 0, "time": 1, "value": [float("nan")]})
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert [_strict_loads(line).get("value") for line in lines][-1] == [None]


def test_no_json_dump_in_kchaos_is_left_lax():
    """Every json.dump(s) of kchaos's own code goes through history/strict_json.py, or says
    allow_nan=False, or only hashes (a digest is not a file)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    lax = []
    for folder in ("checkers", "clusters", "harness", "history", "nemesis", "steps", "workloads"):
        for path in (root / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bjson\.dumps?\(|json\.JSONEncoder\(", line) and not (
                    "allow_nan=False" in line
                    or "hashlib" in line
                    or path.name == "strict_json.py"
                    or "searched, not written" in line
                    or line.lstrip().startswith("#")
                ):
                    lax.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert not lax, "\n".join(lax)


# -- bounded feature levels and clock parameters -----------------------------------------------


@SETTINGS
@given(level=st.one_of(st.integers(32768, 10**30), st.sampled_from(["３", "٣", "1e3", "-1"])))
def test_a_feature_level_outside_a_short_is_refused(level):
    r = kchaos("run", "--plan-only", "--seed", "1", "--version", "4.1", "--txn",
               "--features", f"transaction.version={level}")  # fmt: skip
    one_error_line(r, "features", f"transaction.version={level}")


@pytest.mark.parametrize("level", [0, 1, 32767])
def test_every_short_feature_level_plans(level: int):
    from steps.feature_steps import parse_features

    assert parse_features(f"transaction.version={level}", "4.1")[0].level == level


_NOT_FINITE = st.sampled_from([float("nan"), float("inf"), -float("inf")])


@SETTINGS
@given(
    kind=st.sampled_from(["bump", "restart-skewed", "strobe"]),
    key=st.sampled_from(["delta_s", "period_s", "duration_s"]),
    value=st.one_of(
        _NOT_FINITE,
        st.floats(min_value=365 * 24 * 3600.0, exclude_min=True, allow_infinity=False),
        st.floats(max_value=-365 * 24 * 3600.0, exclude_max=True, allow_infinity=False),
    ),
)
def test_clock_parameters_are_finite_and_bounded(kind, key, value):
    from nemesis.api import FaultStep
    from nemesis.clock import ClockNemesis
    from nemesis.errors import NemesisError

    if key != "delta_s" and kind != "strobe":
        key = "delta_s"  # bump and restart-skewed read only delta_s
    params = {"delta_s": 5.0, **({"period_s": 2.0, "duration_s": 10.0} if kind == "strobe" else {})}
    params[key] = value
    step = FaultStep(
        at_s=1.0, action="start", fault="clock", kind=kind, target="one", params=params
    )
    with pytest.raises(NemesisError, match=key):
        ClockNemesis().check(step)


@pytest.mark.parametrize(
    "params",
    [
        {"delta_s": -365 * 24 * 3600.0, "period_s": 2, "duration_s": 7 * 24 * 3600.0},
        {"delta_s": 0.05, "period_s": 3600, "duration_s": 0.5},
    ],
)
def test_clock_parameters_at_their_bounds_are_accepted(params):
    from nemesis.api import FaultStep
    from nemesis.clock import ClockNemesis

    step = FaultStep(at_s=1.0, action="start", fault="clock", kind="strobe", params=params)
    assert ClockNemesis().check(step) == {k: float(v) for k, v in params.items()}


# -- cluster up --hosts: the inventory checked before connecting to anything -------------------

_GOOD_HOST = {"name": "n1", "address": "192.0.2.11", "role": "broker,controller"}


def _inventory(tmp_path, hosts, **top):
    import yaml

    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"cluster": "lab", "known_hosts": "kh", **top, "hosts": hosts}))
    return path


def _no_connection(monkeypatch, tmp_path):
    import paramiko

    def connect(*a, **k):
        raise AssertionError("connected before the inventory was checked")

    monkeypatch.setattr(paramiko.SSHClient, "connect", connect)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/kchaos-test.sock")
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))


BAD_HOST_FIELDS = {
    "name": st.sampled_from(["", "../x", "a/b", "-n", "n 1", "x" * 200, None, 7]),
    "address": st.sampled_from(
        [
            "",
            "kafka1.example",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "10.0.0.256",
            "10.0.0",
            None,
            3,
        ]
    ),
    "port": st.one_of(st.integers(max_value=0), st.integers(min_value=65536), st.just("22")),
    "user": st.sampled_from(["", "root; rm -rf /", "a b", "-x", "x" * 40, 5]),
    "node_id": st.one_of(st.integers(max_value=-1), st.integers(min_value=2**31), st.just("1")),
    "data_dir": st.sampled_from(["data", "/", "/srv/my data", "/srv/$(id)", "~/x"]),
}


@settings(max_examples=30, deadline=None)
@given(
    bad=st.sets(st.sampled_from(sorted(BAD_HOST_FIELDS)), min_size=1, max_size=3).flatmap(
        lambda keys: st.fixed_dictionaries({k: BAD_HOST_FIELDS[k] for k in keys})
    )
)
def test_cluster_up_hosts_says_every_problem_before_connecting(bad, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("inv")
    inv = _inventory(tmp_path, [{**_GOOD_HOST, **bad}])
    with pytest.MonkeyPatch.context() as mp:
        _no_connection(mp, tmp_path)
        r = kchaos("cluster", "up", "--hosts", str(inv))
    assert r.exit_code == BAD_INPUT_EXIT, r.output
    assert "Traceback" not in r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    # One line per field that is wrong, each naming the file and the field.
    assert len(lines) == len(bad), r.stderr
    for field in bad:
        assert any(field in line for line in lines), (field, r.stderr)
    assert all(str(inv) in line for line in lines), r.stderr
    assert not (tmp_path / "cache").exists()


def test_every_host_and_top_level_problem_is_its_own_line(tmp_path, monkeypatch):
    _no_connection(monkeypatch, tmp_path)
    hosts = [
        {**_GOOD_HOST, "port": 0},
        {"name": "n2", "address": "kafka2.example", "role": "broker,controller"},
        {"name": "n3", "address": "192.0.2.13", "role": "leader", "colour": "red"},
    ]
    inv = _inventory(tmp_path, hosts, extra=1, accept_new_host_keys="yes")
    r = kchaos("cluster", "up", "--hosts", str(inv))
    assert r.exit_code == BAD_INPUT_EXIT, r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    for says in ("unknown key extra", "host n1: port", "host n2: address", "unknown role leader",
                 "unknown field colour", "accept_new_host_keys must"):  # fmt: skip
        assert sum(says in line for line in lines) == 1, (says, r.stderr)
    assert len(lines) == 6, r.stderr


# -- campaigns remove only the clusters their cells made ---------------------------------------


class _FakeCluster:
    """A Docker cluster that exists until removed; records who removed it."""

    def __init__(self, exists: set[str], removed: list[str], name: str):
        self._exists, self._removed, self.name = exists, removed, name

    def exists(self) -> bool:
        return self.name in self._exists

    def remove(self) -> None:
        self._exists.discard(self.name)
        self._removed.append(self.name)


@pytest.fixture
def docker_clusters(monkeypatch, tmp_path):
    """Which Docker clusters exist (a set to fill) and which were removed (a list)."""
    import clusters.handles

    exists: set[str] = set()
    removed: list[str] = []
    monkeypatch.setattr(
        clusters.handles, "open_cluster", lambda name, **k: _FakeCluster(exists, removed, name)
    )
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    # No real run may start from here: a cell's `kchaos run` finds no engine, and the CLI's
    # Runner runs nothing.
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/kchaos-test.sock")
    return exists, removed


def _campaign_spec(tmp_path, cluster: str = "lab") -> str:
    spec = tmp_path / "c.yaml"
    spec.write_text(f"name: c\ncluster: {cluster}\naxes:\n  workload: [queue]\n")
    return str(spec)


@pytest.mark.parametrize(("parallel", "slot"), [("1", "lab"), ("2", "lab-1")])
def test_a_campaign_refuses_a_cluster_it_did_not_make(
    tmp_path, docker_clusters, monkeypatch, parallel, slot
):
    import harness.campaign.runner

    def no_cells(self):
        raise AssertionError("a cell started")

    monkeypatch.setattr(harness.campaign.runner.Runner, "run", no_cells)
    exists, removed = docker_clusters
    exists.add(slot)
    results = tmp_path / "results"
    r = kchaos("campaign", _campaign_spec(tmp_path), "--results-dir", str(results),
               "--no-progress", "--parallel", parallel)  # fmt: skip
    line = one_error_line(r, f"cluster '{slot}' exists and this campaign did not make it")
    assert f"kchaos cluster down --name {slot}" in line and "cluster: OTHER" in line
    assert removed == [] and slot in exists
    assert not results.exists()  # refused before its folder was made


def test_a_runner_removes_only_what_its_cells_left(tmp_path, docker_clusters):
    import sys

    from harness.campaign.runner import MADE, Runner, new_record
    from harness.campaign.spec import expand

    exists, removed = docker_clusters
    camp = expand({"name": "c", "cluster": "lab", "axes": {"workload": ["queue"]}}, where="c")
    directory = tmp_path / "c"
    directory.mkdir()
    fake = tmp_path / "fake_run.py"
    # A cell that leaves its cluster behind (as a killed run would) and exits valid.
    fake.write_text("import sys\nsys.exit(0)\n")
    exists.add("lab")
    runner = Runner(camp, directory, new_record(camp, "c"), say=lambda m: None,
                    command=[sys.executable, str(fake)])  # fmt: skip
    with pytest.raises(Exception, match="did not make it"):
        runner.run()
    assert removed == []
    # Resumed: its directory says a cell of its own ran on lab, so what is there is its own.
    (directory / MADE).write_text("lab\n")
    runner = Runner(camp, directory, new_record(camp, "c"), say=lambda m: None,
                    command=[sys.executable, str(fake)])  # fmt: skip
    assert runner.run() == 0
    assert removed == ["lab"]
    assert (directory / MADE).read_text().split() == ["lab"]


def test_a_campaigns_folder_check_is_the_name_rule():
    """The campaign folder's name check is clusters/hold.py's name rule alone: it refuses '/',
    '..' and '.', so a name that passes is one folder's name (the dead Path(name).name check
    is gone)."""
    from clusters.hold import name_problem

    for name in ("..", ".", "a/b", "/abs", "../x"):
        assert name_problem(name)


# -- one prefix: every refusal of a run's options starts with the option at fault --------------

_FLAGGED = r"error: --[a-z-]+(, --[a-z-]+)*: \S"

BAD_RUN_OPTIONS = [
    ["--time-limit", "nan"],
    ["--time-limit", "0"],
    ["--rate", "-1"],
    ["--concurrency", "0"],
    ["--keys", "0"],
    ["--nemesis-interval", "0.01"],
    ["--topology", "nope"],
    ["--quorum", "x"],
    ["--client", "nope"],
    ["--version", "banana"],
    ["--upgrade-to", "banana"],
    ["--downgrade-to", "3.1"],
    ["--features", "x"],
    ["--features", "transaction.version=99999"],
    ["--nemesis", "bogus"],
    ["--name", "../x"],
    ["--cluster", "../x"],
    ["--subnet", "8.8.8.0/24"],
    ["--subnet", "10.0.0.1/24"],
    ["--zookeepers", "3"],
    ["--workload", "nope"],
    ["--workload", "admin", "--mode", "subscribe"],
    ["--workload", "admin", "--txn", "--mode", "subscribe"],
    ["--workload", "admin", "--client", "java"],
    ["--topology", "zk", "--version", "4.0"],
    ["--time-limit", "100000", "--nemesis-interval", "0.1", "--nemesis", "kill"],
    ["--send-mode", "async", "--workload", "admin"],
    ["--send-mode", "sync", "--in-flight", "3"],
    ["--client-version", "3.9"],
    ["--group-protocol", "consumer"],
    ["--txn-protocol", "v2"],
    ["--quorum", "dynamic", "--version", "3.8"],
]


@pytest.mark.parametrize("args", BAD_RUN_OPTIONS, ids=" ".join)
def test_every_run_refusal_starts_with_its_flag(args: list[str]):
    import re

    line = one_error_line(kchaos("run", "--plan-only", "--seed", "1", *args))
    assert re.match(_FLAGGED, line), line
    named = {a for a in args if a.startswith("--")}
    assert any(line.startswith(f"error: {flag}") or f", {flag}" in line for flag in named), line


@pytest.mark.parametrize("args", BAD_RUN_OPTIONS[14:], ids=" ".join)
def test_a_spec_files_refusal_names_the_file_then_the_flag(args: list[str], tmp_path):
    import re

    import yaml

    data, i = {}, 0
    while i < len(args):
        key = args[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
            data[key] = float(value) if key in ("time_limit", "nemesis_interval") else value
            i += 2
        else:
            data[key], i = True, i + 1
    for key in ("zookeepers", "in_flight"):
        if key in data:
            data[key] = int(data[key])
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(data))
    line = one_error_line(kchaos("run", "--plan-only", "--seed", "1", "--spec", str(spec)))
    assert re.match(rf"error: {re.escape(str(spec))}: --[a-z-]+(, --[a-z-]+)*: \S", line), line


@SETTINGS
@given(
    flag=st.sampled_from(
        ["--time-limit", "--rate", "--nemesis-interval", "--concurrency", "--keys"]
    ),
    value=st.sampled_from(["nan", "inf", "-inf", "-1", "1e400", "0", "abc"]),
)
def test_a_bad_number_on_the_command_line_starts_with_its_flag(flag: str, value: str):
    r = kchaos("run", "--plan-only", "--seed", "1", flag, value)
    if r.exit_code == 0:  # 0 is a valid --rate
        return
    line = one_error_line(r)
    assert line.startswith(f"error: {flag}: "), line
