"""Issue 27 (WP-C): applicability, messages, exit codes and help across the kchaos CLI.

Each bad input ends as one line on stderr naming the option and what would be accepted, with
the documented exit code (README "Exit codes"), never a traceback; nothing is written (every
case here is `--plan-only`, a campaign `--plan-only`, or fails before a run directory exists).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.cli.run_cli import REPLAY_OVERRIDES
from harness.exit_codes import BAD_INPUT_EXIT, KCHAOS_FAILED_EXIT
from harness.spec import OPTIONS

INVENTORY = """cluster: lab
known_hosts: kh
defaults: {user: root, key: id}
hosts:
  - {name: n1, address: 192.0.2.11, role: "broker,controller"}
"""


def kchaos(*args: str):
    return CliRunner().invoke(main, list(args))


def one_error_line(r, *says: str) -> str:
    """The refusal: exit 254, no traceback, one line on stderr that says each of ``says``."""
    assert r.exit_code == BAD_INPUT_EXIT, r.output
    assert "Traceback" not in r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for s in says:
        assert s in lines[0], lines[0]
    return lines[0]


def plan_only(*args: str):
    return kchaos("run", "--plan-only", "--seed", "1", *args)


# -- 1. kchaos itself failing; kchaos --version


def test_an_unexpected_exception_is_one_line_and_exit_255(monkeypatch):
    import harness.cli.run_cli

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(harness.cli.run_cli, "build_plan", boom)
    r = plan_only()
    assert r.exit_code == KCHAOS_FAILED_EXIT == 255
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kchaos failed: RuntimeError: kaboom")


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_kchaos_version(flag: str):
    r = kchaos(flag)
    assert r.exit_code == 0
    assert r.stdout.startswith("kchaos ")


def test_a_commands_version_is_still_kafkas():
    r = plan_only("--version", "4.0")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["spec"]["version"] == "4.0"


# -- 2. options that cannot apply


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--workload", "admin", "--txn"], ["--txn: only applies with --workload queue"]),
        (["--workload", "admin", "--mode", "subscribe"], ["--mode", "--workload queue"]),
        (["--workload", "admin", "--keys", "100"], ["--keys", "--workload queue"]),
        (
            ["--workload", "admin", "--txn", "--mode", "subscribe", "--keys", "3"],
            ["--keys, --txn, --mode: only apply with --workload queue, not --workload admin"],
        ),
        (
            ["--topology", "kraft", "--zookeepers", "3"],
            ["--zookeepers: only applies with --topology zk or migration"],
        ),
        (["--topology", "kraft-combined", "--zookeepers", "3"], ["--zookeepers", "zk"]),
        # Every refusal starts with the option at fault (harness/spec.py flagged).
        (["--workload", "admin", "--client", "java"], ["--client: java drives the queue"]),
        (
            ["--workload", "admin", "--send-mode", "async"],
            ["--send-mode: async is an option of the queue and share workloads"],
        ),
    ],
)
def test_an_option_that_cannot_apply_is_refused(args: list[str], says: list[str]):
    one_error_line(plan_only(*args), *says)


@pytest.mark.parametrize(
    "text",
    [
        "workload: admin\ntxn: true\n",
        "workload: admin\nmode: subscribe\n",
        "topology: kraft\nzookeepers: 3\n",
    ],
)
def test_a_spec_file_option_that_cannot_apply_is_refused(tmp_path: Path, text: str):
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    one_error_line(plan_only("--spec", str(spec)), "only appl")


def test_what_applies_still_runs():
    for args in (
        ["--topology", "zk", "--zookeepers", "3", "--version", "3.9"],
        ["--topology", "migration", "--zookeepers", "3", "--version", "3.9"],
        ["--workload", "queue", "--txn", "--mode", "subscribe", "--keys", "3"],
        ["--workload", "admin"],
    ):
        r = plan_only(*args)
        assert r.exit_code == 0, (args, r.output)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--subnet", "10.213.9.0/24"], "--subnet 10.213.9.0/24: a run on the hosts of"),
        (["--zookeepers", "3"], "--zookeepers 3: a run on the hosts of"),
    ],
)
def test_addresses_and_nodes_do_not_apply_with_hosts(tmp_path: Path, args, says):
    inv = tmp_path / "hosts.yaml"
    inv.write_text(INVENTORY)
    one_error_line(plan_only("--hosts", str(inv), *args), says)


# -- 2. --replay: which options may change a stored plan


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    r = plan_only("--time-limit", "20")
    assert r.exit_code == 0, r.output
    (run_dir / "plan.json").write_text(r.stdout)
    return run_dir


REFUSED_WITH_REPLAY = [
    ["--version", "4.0"],
    ["--nemesis", "kill"],
    ["--seed", "5"],
    ["--time-limit", "5"],
    ["--txn"],
    ["--workload", "admin"],
    ["--topology", "kraft"],
    ["--concurrency", "2"],
]


@pytest.mark.parametrize("args", REFUSED_WITH_REPLAY)
def test_replay_refuses_what_would_change_the_plan(stored: Path, args: list[str]):
    r = kchaos("run", "--plan-only", "--replay", str(stored), *args)
    line = one_error_line(r, f"{args[0]} cannot be given with it", "--replay")
    for name in REPLAY_OVERRIDES:
        assert "--" + name.replace("_", "-") in line


def test_replay_refuses_a_spec_file(stored: Path, tmp_path: Path):
    spec = tmp_path / "s.yaml"
    spec.write_text("time_limit: 5\n")
    one_error_line(
        kchaos("run", "--plan-only", "--replay", str(stored), "--spec", str(spec)), "--spec"
    )


def test_replay_applies_and_says_where_it_is_kept(stored: Path, tmp_path: Path):
    r = kchaos(
        "run",
        "--plan-only",
        "--replay",
        str(stored),
        "--name",
        "again",
        "--cluster",
        "other",
        "--results-dir",
        str(tmp_path / "res"),
    )
    assert r.exit_code == 0, r.output
    start = r.stdout.index("\n{") + 1
    said, plan = " ".join(r.stdout[:start].split()), json.loads(r.stdout[start:])
    assert plan["spec"]["name"] == "again"
    assert plan["spec"]["cluster"] == "other"
    assert plan["spec"]["results_dir"] == str(tmp_path / "res")
    assert plan["spec"]["time_limit"] == 20  # the rest as stored
    assert "name again" in said and "cluster other" in said
    assert not (tmp_path / "res").exists()


def test_every_run_option_is_either_a_replay_override_or_refused():
    names = {o.name for o in OPTIONS}
    assert set(REPLAY_OVERRIDES) <= names


# -- 2. campaign exclude


def campaign_spec(tmp_path: Path, exclude) -> str:
    spec = {
        "name": "ex",
        "base": {"time_limit": 10, "timing": "fast"},
        "axes": {"workload": ["queue", "admin"], "nemesis": ["partition", "kill"]},
        "exclude": exclude,
        "seeds": 1,
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


@pytest.mark.parametrize(
    ("exclude", "says"),
    [
        ([{"wrkload": "admin"}], "exclude[0]: 'wrkload' is not an axis (axes: workload, nemesis)"),
        ([{"workload": "amdin"}], "exclude[0]: 'amdin' is not a value of axis workload"),
        ([{"timing": "fast"}], "'timing' is not an axis"),
        ([{"workload": "admin"}, {}], "exclude[1] is empty"),
    ],
)
def test_campaign_exclude_names_axes_and_their_values(tmp_path: Path, exclude, says):
    one_error_line(kchaos("campaign", "--plan-only", campaign_spec(tmp_path, exclude)), says)


def test_campaign_exclude_that_names_a_cell_excludes_it(tmp_path: Path):
    r = kchaos(
        "campaign",
        "--plan-only",
        campaign_spec(tmp_path, [{"workload": "admin", "nemesis": "kill"}]),
    )
    assert r.exit_code == 0, r.output


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=12))
def test_campaign_exclude_of_any_other_key_is_refused(tmp_path: Path, key: str):
    if key.replace("-", "_") in ("workload", "nemesis"):
        return
    one_error_line(
        kchaos("campaign", "--plan-only", campaign_spec(tmp_path, [{key: "queue"}])),
        "is not an axis",
    )


# -- 4. exit codes: one table, the README's, and the code's constants


def test_the_readme_exit_code_table_is_the_codes_table():
    from harness.exit_codes import exit_code_table

    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    assert "## Exit codes" in readme
    assert exit_code_table() in readme


def test_the_table_agrees_with_every_commands_constants():
    import checkers.analyze.cli as analyze_cli
    import checkers.analyze.runs as analyze_runs
    from checkers.core import verdict
    from harness import exit_codes
    from harness.campaign import report

    table = {code: commands for code, _, commands in exit_codes.EXIT_CODES}
    assert len(table) == len(exit_codes.EXIT_CODES)  # each code once
    for status, code in verdict.EXIT_CODES.items():
        assert code in table, status
    assert verdict.CRASHED_EXIT == exit_codes.KCHAOS_FAILED_EXIT in table
    assert analyze_cli.BAD_INPUT_EXIT == exit_codes.BAD_INPUT_EXIT in table
    assert analyze_runs.CRASHED_EXIT == exit_codes.CRASHED_RUN_EXIT in table
    for name in dir(exit_codes):
        if name.endswith("_EXIT"):
            assert getattr(exit_codes, name) in table, name
    # A campaign's exit code is a verdict's.
    assert report.exit_code([]) in table


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--no-such-option"],
        ["run", "--plan-only", "--timing", "banana"],
        ["cluster", "status", "--no-such-option"],
        ["campaign", "/nonexistent/c.yaml", "--plan-only"],
        ["nosuchcommand"],
    ],
)
def test_bad_input_exits_254_everywhere(args: list[str]):
    r = kchaos(*args)
    assert r.exit_code == BAD_INPUT_EXIT, r.output
    assert "Traceback" not in r.output


# -- 5. help: every option described with its choices; run --help by concern


def commands(group: click.Group = main, path: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


# Left to issue 27's package A, which owns `hosts down --name` (a name type).
UNDESCRIBED_ELSEWHERE = {(("hosts", "down"), "--name")}


def test_every_option_of_every_command_is_described_with_its_choices():
    missing = []
    for path, cmd in commands():
        ctx = click.Context(cmd, info_name=path[-1])
        for param in cmd.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            flag = max(param.opts, key=len)
            if (path, flag) in UNDESCRIBED_ELSEWHERE:
                continue
            if not (param.help or "").strip():
                missing.append(f"{' '.join(path)} {flag}: no description")
                continue
            record = param.get_help_record(ctx)
            assert record is not None
            shown = " ".join(record)
            if isinstance(param.type, click.Choice):
                for choice in param.type.choices:
                    if str(choice) not in shown:
                        missing.append(f"{' '.join(path)} {flag}: choice {choice} not shown")
    assert not missing, "\n".join(missing)


def test_run_help_is_grouped_by_concern():
    from harness.cli.run_cli import HELP_GROUPS, run

    out = kchaos("run", "--help").stdout
    titles = [title for title, _ in HELP_GROUPS]
    positions = [out.index(f"{title} options:") for title in titles]
    assert positions == sorted(positions)
    assert {"Cluster", "Workload", "Faults", "Steps", "Output"} <= set(titles)
    # Every option in exactly one group (only --help is left to "Other").
    grouped = [name for _, names in HELP_GROUPS for name in names]
    assert len(grouped) == len(set(grouped))
    params = {p.name for p in run.params if isinstance(p, click.Option)}
    assert params - set(grouped) == {"help"} or params - set(grouped) == set()
    for o in OPTIONS:
        assert f"--{o.flag}" in out


def test_usage_errors_are_one_line_naming_the_option():
    one_error_line(plan_only("--timing", "banana"), "--timing", "'fast', 'default'", "--help")
    one_error_line(plan_only("--workload", "banana"), "unknown workload 'banana'", "queue, admin")
    assert "--workload [queue|admin|share]" in kchaos("run", "--help").stdout


def test_an_unquoted_version_in_a_spec_says_to_quote_it(tmp_path: Path):
    spec = tmp_path / "s.yaml"
    spec.write_text("version: 3.9\n")
    one_error_line(plan_only("--spec", str(spec)), 'quote it (version: "3.9")')


@pytest.mark.parametrize("flag", ["--version", "--upgrade-to", "--downgrade-to"])
def test_a_version_error_names_its_flag(flag: str):
    one_error_line(plan_only(flag, "banana"), f"{flag}: 'banana' is not a Kafka version")


def test_a_long_error_is_one_line_on_a_pipe(tmp_path: Path):
    spec = tmp_path / ("x" * 120 + ".yaml")
    spec.write_text("time_limit: abc\n")
    one_error_line(plan_only("--spec", str(spec)), "--time-limit: ")


# -- campaign records that are not campaign records (survey §0 T7-T10), and --rerun-failed's
# companions


@pytest.mark.parametrize(
    "text",
    ["{}", "[]", '{"cells": [{"id": "x"}]}', '{"cells": 3}', "null", '"cells"'],
)
@pytest.mark.parametrize("flag", ["--resume", "--rerun-failed"])
def test_a_record_that_is_not_a_campaigns_is_one_line(tmp_path: Path, text: str, flag: str):
    record = tmp_path / "R"
    record.mkdir()
    (record / "campaign.json").write_text(text)
    args = [flag, str(record)]
    if flag == "--resume":
        args = [campaign_spec(tmp_path, []), *args]
    one_error_line(kchaos("campaign", *args), f"{flag} {record}", "campaign")
    assert sorted(p.name for p in record.iterdir()) == ["campaign.json"]


def test_a_records_spec_that_is_not_a_mapping_is_one_line(tmp_path: Path):
    record = tmp_path / "R"
    record.mkdir()
    (record / "campaign.json").write_text(
        json.dumps({"cells": [{"id": "a", "status": "invalid"}], "spec": [1]})
    )
    one_error_line(kchaos("campaign", "--rerun-failed", str(record)), "spec is not a mapping")


def test_rerun_failed_refuses_a_spec_file_and_resume(tmp_path: Path):
    record = tmp_path / "R"
    record.mkdir()
    (record / "campaign.json").write_text('{"cells": []}')
    spec = campaign_spec(tmp_path, [])
    one_error_line(
        kchaos("campaign", spec, "--rerun-failed", str(record)), "not used with --rerun-failed"
    )
    one_error_line(
        kchaos("campaign", "--rerun-failed", str(record), "--resume", str(record)),
        "--resume and --rerun-failed exclude each other",
    )


def test_plan_only_checks_resume(tmp_path: Path):
    record = tmp_path / "R"
    record.mkdir()
    (record / "campaign.json").write_text('{"cells": [{"id": "other", "status": "valid"}]}')
    one_error_line(
        kchaos("campaign", "--plan-only", campaign_spec(tmp_path, []), "--resume", str(record)),
        "its cells are not this spec's cells",
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--topology", "kraft", "--zookeepers", "3"], "--zookeepers only applies with"),
        (["--topology", "kraft-combined", "--zookeepers", "1"], "--zookeepers only applies"),
        (["--brokers", "5"], "--brokers does not apply with --topology kraft-combined"),
    ],
)
def test_cluster_up_refuses_what_cannot_apply_before_the_engine(
    tmp_path: Path, monkeypatch, args: list[str], says: str
):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    one_error_line(kchaos("cluster", "up", *args), says)
    assert not (tmp_path / "cache").exists()


def test_a_spec_file_that_is_not_text_is_one_line(tmp_path: Path):
    spec = tmp_path / "b.yaml"
    spec.write_bytes(b"\x00\xff\xfe")
    one_error_line(plan_only("--spec", str(spec)), "not a UTF-8 text file")


def test_cluster_status_advice_names_the_cluster():
    from types import SimpleNamespace

    from clusters.docker_labels import LabelledCluster
    from clusters.errors import ClusterError

    empty = SimpleNamespace(list=lambda **kw: [])
    client = SimpleNamespace(containers=empty, networks=empty)
    with pytest.raises(ClusterError, match="'kchaos cluster up --name lab2'"):
        LabelledCluster(client, "lab2").info()  # type: ignore[arg-type]


def _some_value(o) -> list[str]:
    """Command-line words giving option ``o`` some value click parses (valid or not for a run:
    with --replay it is refused before any check)."""
    if o.kind is bool:
        return [f"--{o.flag}"]
    if o.choices:
        return [f"--{o.flag}", str(o.choices[-1])]
    if o.name == "workload":
        return [f"--{o.flag}", "admin"]
    if o.kind in (int, float):
        # A number inside the option's range, which click checks before --replay is refused.
        return [f"--{o.flag}", str(int(max(3, o.minimum or 0)))]
    return [f"--{o.flag}", "x"]


BY_NAME = {o.name: o for o in OPTIONS}
NOT_WITH_REPLAY = [o.name for o in OPTIONS if o.name not in REPLAY_OVERRIDES]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chosen=st.lists(st.sampled_from(NOT_WITH_REPLAY), min_size=1, max_size=4, unique=True))
def test_replay_refuses_any_other_run_option(stored: Path, chosen: list[str]):
    chosen = [BY_NAME[name] for name in chosen]
    words = [w for o in chosen for w in _some_value(o)]
    line = one_error_line(kchaos("run", "--plan-only", "--replay", str(stored), *words), "--replay")
    for o in chosen:
        assert f"--{o.flag}" in line
