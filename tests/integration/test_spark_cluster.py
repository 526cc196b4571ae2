"""kchaos check and kchaos analyze on a real Spark cluster give what the local engine gives.

A standalone master and worker, and a Spark Connect server, started on 127.0.0.1 from pyspark's
own jars (checkers/scan/spark_cluster.py; no download, no Docker). Each command runs as a user runs
it, in a process of its own, and is compared with the same command on the local engine: the
verdict, the exit code and every finding (check), every table and the page (analyze).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from checkers.api import check
from checkers.scan.spark_cluster import ConnectServer, Standalone, start_connect, start_standalone
from tests.unit.checkers.histories import mixed_anomalies
from tests.unit.checkers.runs import make_run

REPO = Path(__file__).parents[2]
pytestmark = pytest.mark.spark
# What two checks of the same run may differ in: which history file and engine, and timings.
_RUN_SPECIFIC = ("history", "engine", "stats")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> Iterator[Standalone]:
    # One worker with both cores and 2 GB for executors (one executor of Spark's default 1 GB).
    with start_standalone(tmp_path_factory.mktemp("standalone"), cores=2, memory="2g") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def connect(tmp_path_factory) -> Iterator[ConnectServer]:
    with start_connect(tmp_path_factory.mktemp("connect"), master="local[2]") as server:
        yield server


def kchaos(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`kchaos ARGS` as a user runs it, on this checkout's code from any directory."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_with_findings(directory: Path) -> Path:
    """A stored run whose history holds G1a, poll-skip, lost-write, unseen and more, and a
    realtime G0 through the queue's dependency edges (which the cycle search reads)."""
    directory.mkdir(parents=True)
    mixed_anomalies().write(directory)
    return directory


def checked(run: Path, *args: str, cwd: Path = REPO) -> tuple[int, dict]:
    proc = kchaos("check", *args, str(run), cwd=cwd)
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    return proc.returncode, json.loads((cwd / run / "results.json").read_text())


def same_verdict(local: tuple[int, dict], other: tuple[int, dict]) -> None:
    (code, ours), (other_code, theirs) = local, other
    assert theirs["engine"] == "spark" and ours["engine"] == "local"
    assert other_code == code == 1  # invalid: the history has failing findings
    assert {k: v for k, v in theirs.items() if k not in _RUN_SPECIFIC} == {
        k: v for k, v in ours.items() if k not in _RUN_SPECIFIC
    }
    assert {f["kind"] for f in ours["findings"]} >= {"G1a", "poll-skip", "lost-write", "unseen"}


def _apps(cluster: Standalone) -> int:
    return cluster.master.text().count("Registering app kchaos-")


def test_check_on_a_standalone_cluster_finds_what_the_local_engine_finds(tmp_path, standalone):
    local = checked(run_with_findings(tmp_path / "local"), "--engine", "local")
    before = _apps(standalone)
    on_cluster = checked(run_with_findings(tmp_path / "cluster"), "--spark-master", standalone.url)
    same_verdict(local, on_cluster)
    # It ran as an application of this master, on its worker's executor.
    assert _apps(standalone) == before + 1
    assert "Asked to launch executor" in standalone.workers[0].text()


def _runs(root: Path) -> Path:
    make_run(root / "queue" / "20261122T014500-1", seed=1, lose_write=True)
    make_run(root / "queue" / "20261122T020000-2", seed=2, nemesis="kill", version="4.0.0")
    make_run(root / "queue" / "20261123T010000-3", seed=3)
    for run in sorted((root / "queue").iterdir()):
        check(run, engine="local")
    return root


def _page(html: Path) -> str:
    # matplotlib names each SVG element by a random id; nothing else on the page varies.
    return re.sub(r"(id=\"|#)(m|p|image)[0-9a-f]{10}\b", r"\1\2ID", html.read_text())


def test_analyze_on_a_standalone_cluster_writes_what_local_spark_writes(tmp_path, standalone):
    root = _runs(tmp_path / "results")
    outs = {}
    for name, args in (("local", []), ("cluster", ["--spark-master", standalone.url])):
        out = tmp_path / name / "analysis.html"  # siblings: the same links to the runs
        before = _apps(standalone)
        proc = kchaos("analyze", *args, "--out", str(out), str(root))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert _apps(standalone) == before + (name == "cluster")
        outs[name] = out
    assert "3 runs, 1 invalid" in _page(outs["local"])
    assert _page(outs["cluster"]) == _page(outs["local"])
    tables = sorted(p.name for p in (outs["local"].parent / "analysis").glob("*.parquet"))
    assert "runs.parquet" in tables
    for name in tables:
        pd.testing.assert_frame_equal(
            pd.read_parquet(outs["cluster"].parent / "analysis" / name),
            pd.read_parquet(outs["local"].parent / "analysis" / name),
        )


def test_check_over_spark_connect_finds_what_the_local_engine_finds(tmp_path, connect):
    local = checked(run_with_findings(tmp_path / "local"), "--engine", "local")
    run_with_findings(tmp_path / "connect")
    # A relative path: the server, whose working directory is not ours, must still find it.
    remote = checked(Path("connect"), "--spark-master", connect.url, cwd=tmp_path)
    same_verdict(local, remote)
    assert "ExecutePlan" in connect.daemon.text() or "ExecuteHolder" in connect.daemon.text()
