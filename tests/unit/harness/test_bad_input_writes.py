"""Issue 27, writes and names: nothing a command is given destroys or overwrites a stored result,
or writes outside the results folder; names are names (clusters/hold.py's rule).

Each case runs the real CLI (CliRunner) in a sandbox: a results folder holding a stored run, an
``outside/`` folder, a kchaos cache with SSH hosts' state, and a Docker engine that must not be
asked (``clusters.engine.client`` fails the test). A refused input must exit 254 with one line on
stderr naming the option, no traceback, and leave every file of the sandbox as it was.
"""

from __future__ import annotations

import hashlib
import os
import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.errors import ClusterError
from clusters.hold import name_problem
from harness.campaign.runner import campaign_dir, keep_last
from harness.campaign.spec import expand
from harness.cli import main
from harness.exit_codes import BAD_INPUT_EXIT
from harness.run.rundir import make_run_dir
from harness.spec import SpecError

RUN = "results/smoke/20261127T000000-1"
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _sandbox(root: Path) -> Path:
    run = root / RUN
    (run / "logs" / "n1").mkdir(parents=True)
    for name, text in {
        "spec.json": '{"workload": "queue"}\n',
        "plan.json": '{"spec": {}}\n',
        "run.json": '{"seed": 1}\n',
        "results.json": '{"status": "valid"}\n',
        "summary.txt": "VALID\n",
        "report.html": "<html>the run's report</html>\n",
        "history.jsonl": '{"kchaos_history": 1}\n',
        "logs/n1/stdout.log": "started\n",
    }.items():
        (run / name).write_text(text)
    (root / "results" / "latest").symlink_to(Path("smoke") / run.name)
    (root / "outside").mkdir()
    (root / "outside" / "keep.txt").write_text("precious\n")
    (root / "empty").mkdir()
    (root / "ednonly").mkdir()
    (root / "ednonly" / "history.edn").write_text("{:type :invoke, :f :poll, :process 0}\n")
    os.mkfifo(root / "fifo")
    (root / "to-devnull.jsonl").symlink_to("/dev/null")
    hosts = root / "cache" / "hosts" / "lab"
    hosts.mkdir(parents=True)
    (hosts / "hosts.yaml").write_text("cluster: lab\n")
    (root / "cache" / "keep").write_text("the cache's own\n")
    return root


def _state(root: Path) -> dict[str, str]:
    """Every path under the sandbox and what it holds (a FIFO or a link by what it is)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "special"
    return out


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    root = _sandbox(tmp_path / "box")
    monkeypatch.chdir(root)
    monkeypatch.setenv("KCHAOS_CACHE", str(root / "cache"))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/kchaos-test.sock")

    def no_engine(*a, **kw):
        raise AssertionError("the Docker engine was asked before the input was checked")

    monkeypatch.setattr("clusters.engine.client", no_engine)
    return root


def _refused(root: Path, args: list[str], names: str) -> None:
    before = _state(root)
    r = CliRunner().invoke(main, args)
    shown = f"{args}: rc {r.exit_code}\n{r.output}"
    assert r.exception is None or isinstance(r.exception, SystemExit), shown
    assert r.exit_code == BAD_INPUT_EXIT, shown
    assert "Traceback" not in r.output, shown
    assert names in r.stderr, shown
    assert _state(root) == before, shown


# -- kchaos check -------------------------------------------------------------------------------

NOT_HISTORIES = [
    f"{RUN}/spec.json",
    f"{RUN}/plan.json",
    f"{RUN}/run.json",
    f"{RUN}/results.json",
    f"{RUN}/summary.txt",
    f"{RUN}/report.html",
    f"{RUN}/histroy.jsonl",
    f"{RUN}/history.edn",
    f"{RUN}/logs",
    f"{RUN}/logs/n1/stdout.log",
    "results",
    "results/smoke",
    "outside",
    "outside/keep.txt",
    "outside/nothing.jsonl",
    "empty",
    "ednonly",
    "fifo",
    "to-devnull.jsonl",
    "/dev/null",
    "-",
    "",
    "no/such/place",
]
_SEGMENT = st.text(string.ascii_letters + string.digits + "._- ", min_size=1, max_size=12)


@SETTINGS
@given(
    path=st.one_of(
        st.sampled_from(NOT_HISTORIES),
        st.lists(_SEGMENT, min_size=1, max_size=3).map(lambda parts: "outside/" + "/".join(parts)),
        _SEGMENT.map(lambda s: f"{RUN}/{s}"),
    )
)
def test_check_refuses_what_is_not_a_history_and_writes_nothing(sandbox, path):
    if Path(sandbox / path).is_dir() and (Path(sandbox / path) / "history.jsonl").exists():
        return  # a generated path that happens to be the run itself
    _refused(sandbox, ["check", path], "kchaos check: ")


def test_check_of_a_runs_spec_json_says_not_a_history_and_to_give_the_run(sandbox):
    r = CliRunner().invoke(main, ["check", f"{RUN}/spec.json"])
    assert r.exit_code == BAD_INPUT_EXIT
    assert "not a history" in r.stderr and f"kchaos check {RUN}" in r.stderr
    assert "EDN" in r.stderr


def test_check_of_a_folder_holding_only_edn_says_to_name_it(sandbox):
    r = CliRunner().invoke(main, ["check", "ednonly"])
    assert r.exit_code == BAD_INPUT_EXIT and "kchaos check ednonly/history.edn" in r.stderr


def test_check_of_an_unreadable_history_keeps_the_stored_verdict(sandbox):
    # The run's history.jsonl is a header only, then a torn line: unreadable, so no verdict.
    with (sandbox / RUN / "history.jsonl").open("a") as f:
        f.write("{oops\n")
    _refused(sandbox, ["check", RUN], "kchaos check: ")


# -- names --------------------------------------------------------------------------------------

BAD_NAMES = ["..", ".", "../..", "../../escape", "/tmp/victim", "/", "a/b", "", "has space",
             "x;rm -rf", "-dash", "_under", "x" * 64, "ä", "a\nb"]  # fmt: skip
bad_names = st.one_of(
    st.sampled_from(BAD_NAMES),
    st.text(min_size=0, max_size=70).filter(lambda s: name_problem(s) is not None),
)
NAME_COMMANDS = [
    ["hosts", "down"],
    ["hosts", "up"],
    ["cluster", "down"],
    ["cluster", "up"],
    ["cluster", "status"],
    ["cluster", "logs", "n1"],
    ["heal"],
]


@SETTINGS
@given(name=bad_names, command=st.sampled_from(NAME_COMMANDS))
def test_a_name_that_is_not_a_name_is_refused_before_anything(sandbox, name, command):
    if "\x00" in name:
        return  # not an argument a shell can pass
    _refused(sandbox, [*command[:2], f"--name={name}", *command[2:]], "--name")


@SETTINGS
@given(name=bad_names, flag=st.sampled_from(["--name", "--cluster"]))
def test_run_plan_only_refuses_a_name_or_cluster_that_is_not_a_name(sandbox, name, flag):
    if "\x00" in name:
        return
    _refused(sandbox, ["run", "--plan-only", "--seed", "1", f"{flag}={name}"], flag[2:])


@settings(max_examples=10, deadline=None)
@given(name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,30}", fullmatch=True))
def test_every_name_the_rule_allows_plans(name):
    r = CliRunner().invoke(
        main, ["run", "--plan-only", "--seed", "1", f"--name={name}", f"--cluster={name}"]
    )
    assert r.exit_code == 0, r.output


def test_hosts_down_dotdot_leaves_the_cache(sandbox):
    _refused(sandbox, ["hosts", "down", "--name", ".."], "--name")
    assert (sandbox / "cache" / "keep").exists() and (sandbox / "cache" / "hosts" / "lab").exists()


def test_hosts_dir_and_run_dir_stay_under_their_roots(sandbox):
    from clusters.ssh_hosts import hosts_dir

    before = _state(sandbox)
    for name in BAD_NAMES:
        with pytest.raises(ClusterError):
            hosts_dir(name)
        with pytest.raises(ClusterError):
            make_run_dir(sandbox / "results", name, 1)
    # results/latest is the link to the newest run, not a folder of runs.
    with pytest.raises(ClusterError, match="not a folder of runs"):
        make_run_dir(sandbox / "results", "latest", 1)
    assert _state(sandbox) == before
    assert hosts_dir("lab") == sandbox / "cache" / "hosts" / "lab"


@pytest.mark.parametrize("key", ["name", "cluster"])
@pytest.mark.parametrize("value", ["../../escape", "/abs", "a b", "x" * 64])
def test_a_campaigns_name_and_cluster_are_names(key, value):
    with pytest.raises(SpecError, match="is not a name"):
        expand({key: value, "axes": {"workload": ["queue"]}})


def test_campaign_folders_stay_under_the_results_folder(sandbox):
    before = _state(sandbox)
    for name in ("../..", "/tmp/x", "a/b"):
        with pytest.raises(SpecError):
            campaign_dir(sandbox / "results", name)
        with pytest.raises(SpecError):
            keep_last(sandbox / "results", name, 1, say=print)
    assert _state(sandbox) == before


# -- analyze --out, cluster down --collect ------------------------------------------------------


@pytest.mark.parametrize(
    "out",
    [
        f"{RUN}/report.html",
        f"{RUN}/analysis.html",
        "outside/keep.txt",
        "outside/keep.html.txt",
        "outside/x.htm",
        "outside",
        "fifo",
    ],
)
def test_analyze_out_never_overwrites_what_it_did_not_write(sandbox, out):
    _refused(sandbox, ["analyze", "results", "--out", out], "--out")


def test_analyze_out_may_replace_an_earlier_analysis_page(sandbox):
    from checkers.analyze.cli import out_problem

    page = sandbox / "outside" / "analysis.html"
    page.write_text("<html><head><meta charset='utf-8'><title>kchaos analysis: results</title>")
    assert out_problem(str(page)) is None
    assert out_problem(str(sandbox / "outside" / "new.html")) is None
    (sandbox / "outside" / "mine.html").write_text("<html>my notes</html>")
    assert "not a page kchaos analyze wrote" in out_problem(str(sandbox / "outside" / "mine.html"))


@pytest.mark.parametrize("collect", [RUN, "outside", "outside/keep.txt", "results/latest"])
def test_cluster_down_collect_needs_a_new_or_empty_folder(sandbox, collect):
    _refused(sandbox, ["cluster", "down", "--name", "zz", "--collect", collect], "--collect")
