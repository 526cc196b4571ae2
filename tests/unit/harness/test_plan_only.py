"""``kchaos run --plan-only`` refuses what a run would refuse, as far as it can tell offline."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.exit_codes import BAD_INPUT_EXIT


def run(*args: str):
    return CliRunner().invoke(main, ["run", *args])


def flat(result) -> str:
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--version", "banana"), "'banana' is not a Kafka version: give a release such as 3.9.2"),
        (("--version", "2.8"), "Kafka 2.8 is older than kchaos supports"),
        (("--version", "3.2.3"), "Kafka 3.2.3 is older than kchaos supports"),
        (("--upgrade-to", "4.x"), "'4.x' is not a Kafka version"),
        (("--nemesis", "partition:isolate-leader"), "partition has no kind 'isolate-leader'"),
        (("--nemesis", "kill@zk-leader"), "kill target 'zk-leader' is only for zk, migration"),
    ],
)
def test_plan_only_refuses_what_a_run_refuses_with_the_same_sentence(args, says):
    r = run(*args, "--plan-only")
    assert r.exit_code == BAD_INPUT_EXIT, r.output
    assert says in flat(r)
    assert "Traceback" not in r.output and '"faults"' not in r.output


def test_a_run_refuses_a_bad_version_before_any_docker_work(monkeypatch):
    import harness.run.interpreter

    def no_run(*a, **k):
        raise AssertionError("the run was started")

    monkeypatch.setattr(harness.run.interpreter, "Run", no_run)
    r = run("--version", "banana")
    assert r.exit_code == BAD_INPUT_EXIT
    assert "'banana' is not a Kafka version" in flat(r)


@pytest.mark.parametrize("version", ["3", "3.3", "3.9", "3.9.2", "4.3.1"])
def test_versions_a_run_may_resolve_pass(version):
    r = run("--version", version, "--seed", "1", "--plan-only")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["spec"]["version"] == version


def test_the_done_when_plan_holds_only_the_named_kind():
    r = run("--nemesis", "partition:isolate-active-controller", "--time-limit", "90", "--plan-only")
    assert r.exit_code == 0, r.output
    faults = json.loads(r.output)["faults"]
    assert len(faults) == 8
    assert {(f["fault"], f["kind"]) for f in faults} == {("partition", "isolate-active-controller")}


def test_plan_only_says_which_items_the_time_limit_leaves_out():
    four = ("--nemesis", "partition,kill,pause,clock")
    r = run(*four, "--seed", "42", "--time-limit", "60", "--plan-only")
    assert r.exit_code == 0, r.output
    json.loads(r.stdout)  # the plan alone on stdout
    note = " ".join(r.stderr.split())
    assert "has 3 fault windows for 4 nemesis items: kill got none" in note
    assert "--time-limit 80 fits them all" in note


def test_the_help_gives_the_item_syntax_with_an_example():
    out = flat(CliRunner().invoke(main, ["run", "--help"]))
    assert "package:kind@target" in out
    assert "partition:isolate-active-controller,kill@active-controller,clock:strobe" in out
    assert "kchaos nemeses" in out


def test_a_run_says_at_its_start_which_items_get_no_window(monkeypatch):
    import harness.run.interpreter

    class Started(Exception):
        pass

    def started(*a, **k):
        raise Started

    monkeypatch.setattr(harness.run.interpreter, "Run", started)
    r = run("--nemesis", "partition,kill,pause,clock", "--seed", "42", "--time-limit", "60")
    # An exception no command turns into a sentence ends as one line and exit 255.
    assert r.exit_code == 255 and "kchaos failed: Started" in flat(r)
    assert "kill got none; --time-limit 80 fits them all" in flat(r)


def test_a_yaml_spec_names_items_as_a_string_or_a_list(tmp_path):
    for text in (
        "nemesis: partition:isolate-one@majority,kill@one\n",
        "nemesis: [partition:isolate-one@majority, kill@one]\n",
        "nemesis:\n  - partition:isolate-one@majority\n  - kill@one\n",
    ):
        path = tmp_path / "spec.yaml"
        path.write_text(text + "time-limit: 60\n")
        r = run("--spec", str(path), "--seed", "2", "--plan-only")
        assert r.exit_code == 0, r.output
        plan = json.loads(r.output)
        assert plan["spec"]["nemesis"] == ["partition:isolate-one@majority", "kill@one"]
        starts = {(f["fault"], f["kind"], f["target"]) for f in plan["faults"][::2]}
        assert starts == {("partition", "isolate-one", "majority"), ("kill", "one", "one")}


@pytest.mark.parametrize(
    ("subnet", "says"),
    [("banana", "bad subnet 'banana'"), ("10.0.0.0/30", "is too small for 3 nodes")],
)
def test_plan_only_refuses_a_subnet_the_cluster_cannot_be_laid_out_in(subnet, says):
    r = run("--subnet", subnet, "--plan-only")
    assert r.exit_code == BAD_INPUT_EXIT, r.output
    assert says in flat(r)
