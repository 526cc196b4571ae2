"""`kchaos shrink` end to end without Kafka: every try a process of a stand-in `kchaos run
--replay` (shrink_fake_run.py: fails exactly when the plan starts a kill), through the real
runner (harness/shrink/replay.py), the record, plan.min.json and shrink.html; and the one
line each kind of bad input gets."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.plan import build_plan, load_plan
from harness.shrink import replay
from harness.shrink.candidates import fault_units
from harness.spec import RunSpec, validate

FAKE = Path(__file__).with_name("shrink_fake_run.py")
CHROMIUM = shutil.which("chromium")


def _failing_run(tmp: Path, findings: list[dict] | None = None) -> Path:
    spec = RunSpec.of(
        nemesis=["partition", "kill", "pause", "clock", "packet"],
        time_limit=60.0,
        nemesis_interval=5.0,
    )
    run_dir = tmp / "results" / "queue" / "20261128T000000-7"
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text(build_plan(validate(spec), 7).to_json())
    if findings is None:
        findings = [{"kind": "lost-write", "explanation": "42 acknowledged, never read"}]
    status = "invalid" if findings else "valid"
    (run_dir / "results.json").write_text(json.dumps({"status": status, "findings": findings}))
    return run_dir


@pytest.fixture
def fake_runs(monkeypatch):
    monkeypatch.setattr(
        "harness.cli.shrink_cli.ReplayRunner",
        partial(replay.ReplayRunner, cli=[sys.executable, str(FAKE)]),
    )


def _shrink(*args: str):
    return CliRunner().invoke(main, ["shrink", *args], catch_exceptions=False)


def test_a_failing_run_shrinks_to_its_one_kill_through_real_replay_processes(tmp_path, fake_runs):
    run_dir = _failing_run(tmp_path)
    result = _shrink(str(run_dir), "--no-progress", "--tries", "2", "--confirm", "2")
    assert result.exit_code == 0, result.output
    (directory,) = run_dir.parent.glob("shrink-*")
    best = load_plan(directory / "plan.min.json")
    (unit,) = fault_units(best.faults)
    assert best.faults[unit[0]].fault == "kill"
    record = json.loads((directory / "shrink.json").read_text())
    assert record["status"] == "done" and record["kinds"] == ["lost-write"]
    assert len(record["original"]["runs"]) == 2
    assert record["confirmed"]["of"] == record["best"] and len(record["confirmed"]["runs"]) == 2
    # Every try is a run directory under its candidate's folder, beside the plan it replayed.
    for c in record["candidates"]:
        for r in c["runs"]:
            assert (directory / r["run_dir"] / "results.json").is_file()
            assert r["run_dir"].startswith(c["id"] + "/")
        assert (directory / c["id"] / "plan.json").is_file()
    assert "original reproduced in 2 of 2 replays" in result.output
    assert "it reproduced in 2 of 2 --confirm runs" in result.output
    page = (directory / "shrink.html").read_text()
    assert "Minimal plan" in page and page.count("<rect") >= 2


def test_with_a_lock_file_each_try_holds_it_and_the_search_between_tries_does_not(
    tmp_path, fake_runs, monkeypatch
):
    lock = tmp_path / "docker.lock"
    monkeypatch.setenv("KCHAOS_LOCK", str(lock))  # as --lock; the fake run reads it too
    run_dir = _failing_run(tmp_path)
    result = _shrink(str(run_dir), "--no-progress", "--tries", "1", "--confirm", "1")
    assert result.exit_code == 0, result.output
    (directory,) = run_dir.parent.glob("shrink-*")
    held = [json.loads(p.read_text())["lock_held"] for p in directory.glob("*/*/run.json")]
    assert len(held) > 3 and all(held)
    with open(lock) as f:  # released after the last try
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_ctrl_c_stops_a_shrink_waiting_for_the_lock_someone_else_holds(tmp_path):
    lock = tmp_path / "docker.lock"
    waits = (
        "import sys, threading, time\n"
        "from pathlib import Path\n"
        "from harness.shrink.replay import _held\n"
        # Threads, as a shrink has: the kernel may hand SIGINT to any of them.
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "print('waiting', flush=True)\n"
        "with _held(Path(sys.argv[1])):\n"
        "    print('taken', flush=True)\n"
    )
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [sys.executable, "-c", waits, str(lock)],
            cwd=Path(__file__).parents[3], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert proc.stdout.readline() == "waiting\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err and "taken" not in out


def test_resume_of_a_finished_shrink_runs_nothing_again(tmp_path, fake_runs):
    run_dir = _failing_run(tmp_path)
    assert _shrink(str(run_dir), "--no-progress", "--confirm", "0").exit_code == 0
    (directory,) = run_dir.parent.glob("shrink-*")
    before = json.loads((directory / "shrink.json").read_text())
    result = _shrink("--resume", str(directory), "--no-progress")
    assert result.exit_code == 0, result.output
    after = json.loads((directory / "shrink.json").read_text())
    assert after["runs"] == before["runs"] and after["best"] == before["best"]


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda t: t / "nowhere", "not a run directory (no such folder)"),
        (lambda t: t, "not a run directory (no plan.json)"),
        (lambda t: _with(t, "plan.json", "{not json"), "plan is not valid JSON"),
        (lambda t: _without(_failing_run(t), "results.json"), "no readable results.json"),
        (lambda t: _failing_run(t, findings=[]), "no failing finding to shrink"),
        (
            lambda t: _failing_run(t, [{"kind": "duplicate", "tolerated": "subscribe"}]),
            "no failing finding to shrink",
        ),
    ],
)
def test_bad_input_gets_one_line(tmp_path, make, says):
    result = _shrink(str(make(tmp_path)))
    assert result.exit_code == 254
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.output


def test_a_kind_the_run_did_not_fail_with_is_refused(tmp_path):
    result = _shrink(str(_failing_run(tmp_path)), "--kind", "G1c")
    assert result.exit_code == 254
    assert "--kind G1c: not a failing kind" in result.output and "lost-write" in result.output


def _with(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(text)
    return folder


def _without(folder: Path, name: str) -> Path:
    (folder / name).unlink()
    return folder


@pytest.mark.skipif(CHROMIUM is None, reason="needs headless Chromium (`apt-get install chromium`)")
def test_shrink_html_in_a_browser_draws_both_schedules(tmp_path, fake_runs):
    run_dir = _failing_run(tmp_path)
    assert _shrink(str(run_dir), "--no-progress", "--confirm", "1").exit_code == 0
    (directory,) = run_dir.parent.glob("shrink-*")
    page = directory / "shrink.html"
    cmd = [CHROMIUM, "--headless=new", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}"]
    if os.geteuid() == 0:
        cmd.append("--no-sandbox")
    dom = subprocess.run(
        [*cmd, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The original's six fault units and the minimal one kill, drawn as bars on one axis.
    assert len(fault_units(load_plan(run_dir).faults)) == 6
    assert dom.stdout.count("<rect") == 6 + 1
    assert "original: 6 fault(s)" in dom.stdout and "1 fault(s)" in dom.stdout
    shot = subprocess.run(
        [*cmd, f"--screenshot={tmp_path / 'shrink.png'}", "--window-size=1000,900", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.returncode == 0 and (tmp_path / "shrink.png").stat().st_size > 10_000
    if os.environ.get("KCHAOS_KEEP_SHOT"):
        shutil.copy(tmp_path / "shrink.png", os.environ["KCHAOS_KEEP_SHOT"])


def test_the_suspects_are_read_from_the_run_once_and_tried_first(tmp_path, fake_runs):
    finding = {"kind": "lost-write", "explanation": "lost on n1", "data": {"broker": "n1"}}
    run_dir = _failing_run(tmp_path, [finding])
    plan = load_plan(run_dir)
    kills = [s for s in plan.faults if s.fault == "kill" and s.action == "start"]
    effects = [{"effect": "down", "nodes": ["n1"]}]
    timeline = [
        {"at_s": s.at_s, "f": "start-kill", "type": "ok", "value": {"effects": effects}}
        for s in kills
    ]
    (run_dir / "nemesis.json").write_text(json.dumps({"timeline": timeline}))
    result = _shrink(str(run_dir), "--no-progress", "--tries", "1", "--max-runs", "3")
    assert result.exit_code == 0, result.output
    (directory,) = run_dir.parent.glob("shrink-*")
    record = json.loads((directory / "shrink.json").read_text())
    assert {k for k, v in record["suspects"].items() if v} == {str(s.seed) for s in kills}
    first = record["candidates"][0]
    assert first["what"].startswith("keep the suspect fault") and "kill" in first["what"]
    assert first["reproduced"] and record["path"][1] == first["id"]
    # A resume orders by the recorded suspects, whatever the run directory holds by then.
    (run_dir / "nemesis.json").unlink()
    again = _shrink("--resume", str(directory), "--no-progress", "--max-runs", "60")
    assert again.exit_code == 0, again.output
    resumed = json.loads((directory / "shrink.json").read_text())
    assert resumed["suspects"] == record["suspects"] and resumed["path"][1] == first["id"]
