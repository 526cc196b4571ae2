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
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.scan.spark_session import master_problem
from harness.cli import main
from harness.exit_codes import BAD_INPUT_EXIT

SETTINGS = settings(max_examples=40, deadline=None)


def kchaos(*args: str):
    return CliRunner().invoke(main, list(args))


def one_error_line(r, *says: str) -> str:
    assert r.exit_code == BAD_INPUT_EXIT, r.output
    assert "Traceback" not in r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for s in says:
        assert s in lines[0], lines[0]
    return lines[0]


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
