"""`kchaos check` end to end on small histories: exit codes, results.json, summary."""

import json

from click.testing import CliRunner

from checkers.cli import check_command
from tests.unit.checkers.histories import H


def run(path):
    return CliRunner().invoke(check_command, [str(path), "--engine", "pandas"])


def test_valid_run_exits_0_and_writes_results(tmp_path):
    H().send(0, 1, 10, 0).poll(1, {1: [(0, 10)]}).write(tmp_path)
    r = run(tmp_path)
    assert r.exit_code == 0, r.output
    assert r.output.startswith("VALID")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["status"] == "valid" and results["findings"] == []
    assert (tmp_path / "summary.txt").read_text() == r.stdout
    assert r.stderr == f"kchaos check: wrote results.json, summary.txt, report.html in {tmp_path}\n"


def test_anomalies_exit_1_with_explanations(tmp_path):
    H().send(0, 1, 10, 0).send(0, 1, 11, 1).poll(1, {1: [(1, 11)]}).write(tmp_path)
    r = run(tmp_path / "history.jsonl")
    assert r.exit_code == 1
    assert "lost-write: 1 failing" in r.output
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["counts"]["lost-write"] == {"failing": 1}
    assert results["valid"] is False


def test_only_unseen_is_unknown_exit_2(tmp_path):
    H().send(0, 1, 10, 0).write(tmp_path)
    r = run(tmp_path)
    assert r.exit_code == 2 and r.output.startswith("UNKNOWN")


def test_tolerated_kinds_say_why(tmp_path):
    h = (
        H()
        .assign(1, [1], f="subscribe")
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .send(0, 1, 12, 2)
        .poll(1, {1: [(0, 10)]})
        .poll(1, {1: [(2, 12)]})
        .poll(2, {1: [(0, 10), (1, 11), (2, 12)]})
    )
    h.write(tmp_path)
    r = run(tmp_path)
    assert r.exit_code == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert "rebalance" in results["tolerated"]["poll-skip"]
    assert any("poll-skip and nonmonotonic-poll are tolerated" in n for n in results["notes"])


def test_unreadable_history_is_one_line_and_exit_254_writing_nothing(tmp_path):
    (tmp_path / "history.jsonl").write_text('{"kchaos_history": 1}\n{oops\n')
    r = run(tmp_path)
    assert r.exit_code == 254
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl"]
    assert r.output.strip().count("\n") == 0 and "history.jsonl:2: not JSON" in r.output
    assert "Traceback" not in r.output


def test_empty_run_directory_is_bad_input(tmp_path):
    r = run(tmp_path)
    assert r.exit_code == 254 and "no history.jsonl or history.parquet" in r.output
    assert list(tmp_path.iterdir()) == []


def test_checker_crash_exits_255_and_keeps_the_traceback(tmp_path, monkeypatch):
    H().send(0, 1, 10, 0).write(tmp_path)

    def boom(*a, **kw):
        raise RuntimeError("bug")

    monkeypatch.setattr("checkers.registry.find_cycles", boom)
    r = run(tmp_path)
    assert r.exit_code == 255
    assert "checker crashed: RuntimeError: bug" in r.output
    assert "Traceback" in (tmp_path / "checker-crash.txt").read_text()
