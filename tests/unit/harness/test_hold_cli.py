"""A held cluster (clusters/hold.py) as the commands see it: `cluster down`, `cluster up`, `heal`
and a second `run` refuse it in one line naming the holder, and go ahead with --force."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

import clusters.docker_lifecycle
import clusters.engine
import nemesis.heal
from clusters import hold
from clusters.errors import ClusterError
from harness.cli import main
from harness.run import interpreter
from harness.run.interpreter import Run

RUN_DIR = "results/queue/20260101T000000-7"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))


class FakeCluster:
    """Says who held the cluster when it was removed."""

    downs: ClassVar[list[hold.Holder | None]] = []

    def __init__(self, client: object, name: str) -> None:
        self.name = self.cluster = name

    def down(self, collect: Path | None = None, say=print) -> int:
        FakeCluster.downs.append(_held_by(self.name))
        return 4

    def fixed_topology(self, quorum: str = "static") -> None:
        return None

    def up(self, *args, **kwargs) -> None:
        FakeCluster.downs.append(_held_by(self.name))


def _held_by(name: str) -> hold.Holder | None:
    try:
        hold.take(name, "probe", "x").release()
    except hold.ClusterHeld as exc:
        return exc.holder
    return None


@pytest.fixture
def fake_docker(monkeypatch):
    FakeCluster.downs = []
    monkeypatch.setattr(clusters.engine, "client", lambda: None)
    monkeypatch.setattr(clusters.docker_lifecycle, "DockerCluster", FakeCluster)
    return FakeCluster.downs


def kchaos(*args: str):
    return CliRunner().invoke(main, list(args))


def flat(result) -> str:
    return " ".join(result.output.split())


def _a_run_holds(name: str = "c1") -> hold.Hold:
    h = hold.take(name, "kchaos run", "run on it anyway")
    h.note_run_dir(RUN_DIR)
    return h


def _refusal(r, force_does: str) -> None:
    assert r.exit_code == 254, r.output
    text = flat(r)
    who = f"pid {os.getpid()} (kchaos run, run directory {RUN_DIR}"
    assert f"cluster 'c1' is in use by {who}" in text
    assert "since " in text and f"add --force to {force_does}" in text
    assert "Traceback" not in r.output


def test_cluster_down_of_a_held_cluster_is_refused(fake_docker):
    with _a_run_holds():
        r = kchaos("cluster", "down", "--name", "c1")
    _refusal(r, "remove it anyway (the run on it then ends with an error)")
    assert fake_docker == []


def test_cluster_down_force_removes_it_and_tells_the_holder(fake_docker):
    with _a_run_holds() as h:
        r = kchaos("cluster", "down", "--name", "c1", "--force")
        note = h.removed_by()
    assert r.exit_code == 0, r.output
    assert "going ahead (--force)" in flat(r) and "removed 4 containers" in flat(r)
    assert note is not None and note["command"] == "kchaos cluster down --force"
    assert note["pid"] == os.getpid()
    # Forced, it removes without the hold: the run still has it.
    assert fake_docker[0] is not None and fake_docker[0].command == "kchaos run"


def test_cluster_down_holds_the_cluster_while_it_removes_it(fake_docker):
    r = kchaos("cluster", "down", "--name", "c1")
    assert r.exit_code == 0, r.output
    assert fake_docker[0] is not None and fake_docker[0].command == "kchaos cluster down"
    assert _held_by("c1") is None and not hold.hold_path("c1").exists()


def test_cluster_up_of_a_held_cluster_is_refused(fake_docker):
    with _a_run_holds():
        r = kchaos("cluster", "up", "--name", "c1", "--subnet", "10.213.143.0/24")
    _refusal(r, "bring it up anyway")
    assert fake_docker == []


def test_heal_of_a_held_cluster_is_refused_unless_forced(monkeypatch):
    healed: list[str] = []
    monkeypatch.setattr(clusters.engine, "client", lambda: None)
    monkeypatch.setattr(clusters.docker_lifecycle, "DockerCluster", FakeCluster)
    monkeypatch.setattr(nemesis.heal, "heal_cluster", lambda dc: healed.append(dc.name) or [])
    with _a_run_holds():
        refused = kchaos("heal", "--name", "c1")
        forced = kchaos("heal", "--name", "c1", "--force")
    _refusal(refused, "heal it anyway")
    assert forced.exit_code == 0, forced.output
    assert healed == ["c1"] and "healed: no fault was in place" in flat(forced)


def _run_args(tmp_path: Path) -> list[str]:
    return ["run", "--cluster", "c1", "--results-dir", str(tmp_path / "results"), "--seed", "1"]


def test_a_second_run_on_a_held_cluster_is_refused_before_it_makes_a_run_directory(tmp_path):
    with _a_run_holds():
        r = kchaos(*_run_args(tmp_path))
    _refusal(r, "run on it anyway")
    assert not (tmp_path / "results").exists()


def test_a_run_holds_its_cluster_and_a_forced_one_goes_ahead_without(tmp_path, monkeypatch):
    seen: list[object] = []

    def execute(self: Run):
        seen.append((self.hold.holder if self.hold else None, _held_by("c1")))
        raise ClusterError("reached the run")

    monkeypatch.setattr(Run, "run_here", execute)
    # In this process, so that `seen` is this test's list (a supervised run is a forked child).
    monkeypatch.setattr(interpreter, "run_supervised", lambda run: run.run_here())
    alone = kchaos(*_run_args(tmp_path))
    with _a_run_holds():
        forced = kchaos(*_run_args(tmp_path), "--force")
    assert "reached the run" in flat(alone) and "reached the run" in flat(forced)
    mine, held = seen[0]
    assert mine is not None and mine.command == "kchaos run" and held == mine
    assert seen[1][0] is None and seen[1][1].run_dir == RUN_DIR
    assert "going ahead (--force)" in flat(forced)
