"""How `kchaos check` composes its checkers: the registry's order, what each may read, and
every input read at most once and only when some checker asks for it."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from checkers.api import check
from checkers.core import inputs as inputs_module
from checkers.core.checker import compose, run_checkers
from checkers.core.checker_result import CheckerResult
from checkers.core.findings import Finding
from checkers.core.inputs import CLUSTER, OBSERVED, Needs, RunInputs
from checkers.registry import REGISTRY, KraftMetadataChecker
from history.format import JEPSEN, REWIND
from tests.unit.checkers.metalogs import dump, healthy
from tests.unit.checkers.runs import make_run

DATA = Path(__file__).parent / "data"


class Reads:
    """A checker that reads what it is told to, declared or not."""

    def __init__(self, name: str, declared: Needs, reads: str = "", after: str = "") -> None:
        self.name, self.declared, self.reads, self.after = name, declared, reads, after

    def needs(self, inputs: RunInputs) -> Needs:
        return self.declared

    def check(self, inputs: RunInputs) -> CheckerResult:
        if self.reads:
            getattr(inputs, self.reads)
        if self.after:
            inputs.result(self.after)
        return CheckerResult(checked=True)


def test_registry_names_are_unique_and_each_reads_only_earlier_results(tmp_path):
    names = [c.name for c in REGISTRY]
    assert len(set(names)) == len(names)
    with RunInputs.open(make_run(tmp_path)) as inputs:
        for i, c in enumerate(REGISTRY):
            assert set(c.needs(inputs).after) <= set(names[:i]), c.name


def test_a_checker_listed_before_one_it_reads_is_refused(tmp_path):
    late = Reads("late", Needs(after=("early",)), after="early")
    refused = pytest.raises(ValueError, match=r"'late' reads \['early'\] but runs before them")
    with RunInputs.open(make_run(tmp_path)) as inputs, refused:
        run_checkers([late, Reads("early", Needs())], inputs)


def test_a_checker_is_refused_what_its_needs_omit(tmp_path):
    sly = Reads("sly", Needs(frozenset({OBSERVED})), reads="cluster")
    refused = pytest.raises(RuntimeError, match=r"'sly' reads cluster\.json but its needs omit")
    with RunInputs.open(make_run(tmp_path)) as inputs, refused:
        run_checkers([sly], inputs)
    nosy = Reads("nosy", Needs(), after="first")
    refused = pytest.raises(RuntimeError, match="'nosy' reads 'first' but its needs omit it")
    with RunInputs.open(tmp_path) as inputs, refused:
        run_checkers([Reads("first", Needs()), nosy], inputs)
    with RunInputs.open(tmp_path) as inputs:
        honest = Reads("honest", Needs(frozenset({CLUSTER})), reads="cluster")
        assert run_checkers([honest], inputs)["honest"].checked


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(inputs_module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(inputs_module, name, counted)
    return calls


def test_each_input_is_read_once_for_all_checkers(tmp_path, monkeypatch):
    run = tmp_path / "zk"
    shutil.copytree(DATA / "zk_failover", run)
    make_run(run)
    for logs in ("metadata", "data"):
        (run / logs).mkdir()
    (run / "metadata" / "n1.txt").write_text(dump(healthy()))
    reads = {
        n: _counting(monkeypatch, n)
        for n in ("load", "read_cluster", "read_run_data", "read_run_metadata", "read_logs")
    }
    check(run, write=False)
    # cluster.json: admin, metadata-logs and zk-controller read it; the data logs: both log
    # checkers.
    assert {n: len(c) for n, c in reads.items()} == dict.fromkeys(reads, 1)


def test_inputs_are_read_only_when_a_checker_asks(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    reads = {n: _counting(monkeypatch, n) for n in ("load", "read_cluster", "read_generator")}
    with RunInputs.open(run) as inputs:
        run_checkers([], inputs)
    assert {n: len(c) for n, c in reads.items()} == dict.fromkeys(reads, 0)
    with RunInputs.open(run) as inputs:
        results = run_checkers([KraftMetadataChecker()], inputs)
    assert results["kraft-metadata"].stats == {"observer_samples": 36}  # 12 rounds of 3 nodes
    assert {n: len(c) for n, c in reads.items()} == {
        "load": 1,
        "read_cluster": 0,
        "read_generator": 0,
    }


def test_only_the_op_rows_some_checker_asked_for_are_read_whole(tmp_path):
    with RunInputs.open(make_run(tmp_path)) as inputs:
        run_checkers([KraftMetadataChecker()], inputs)
        inputs.op_rows(processes=["observer"])
        with pytest.raises(RuntimeError, match=r"op rows \['send'\] were not asked for"):
            inputs.op_rows(fs=["send"])


def _finding(kind: str, **kw) -> Finding:
    return Finding(kind, 0, (1,), "x", **kw)


def test_compose_applies_the_writers_tolerances_once_and_keeps_registry_order():
    results = {
        "a": CheckerResult([_finding("unseen", unknown=True)], ["a1"], False, {"x": 1}),
        "b": CheckerResult([_finding("G1c")], ["b1"], True, {"y": 2}),
    }
    kchaos = compose(results, REWIND, None)
    assert [(f.kind, f.unknown, f.tolerated) for f in kchaos.findings] == [
        ("unseen", True, None),
        ("G1c", False, None),
    ]
    assert kchaos.notes == ["a1", "b1"] and kchaos.stats == {"x": 1, "y": 2} and kchaos.checked
    jepsen = compose(results, JEPSEN, None)
    assert not jepsen.findings[0].unknown and jepsen.findings[1].tolerated


def test_a_later_checkers_replacement_stands_for_the_finding_it_judged():
    lost, other = _finding("lost-write"), Finding("lost-write", 1, (2,), "y")
    judged = _finding("lost-write-power-loss-documented", tolerated="documented")
    results = {
        "queue": CheckerResult([lost, other], checked=True),
        "durability": CheckerResult([judged], replaces=[lost]),
    }
    assert compose(results, REWIND, None).findings == [other, judged]


class Replaces(Reads):
    def check(self, inputs: RunInputs) -> CheckerResult:
        return CheckerResult(replaces=[_finding("lost-write")])


def test_a_checker_replaces_only_findings_of_checkers_it_reads(tmp_path):
    queue = type("Q", (Reads,), {"check": lambda self, i: CheckerResult([_finding("lost-write")])})
    stray = pytest.raises(RuntimeError, match="replaces findings no checker it reads reported")
    with RunInputs.open(make_run(tmp_path)) as inputs, stray:
        run_checkers([queue("q", Needs()), Replaces("r", Needs())], inputs)
    with RunInputs.open(make_run(tmp_path)) as inputs:
        run_checkers([queue("q", Needs()), Replaces("r", Needs(after=("q",)))], inputs)


def test_nobody_judging_anything_says_so():
    run = compose({"a": CheckerResult(notes=["a1"])}, REWIND, None)
    assert not run.checked and run.notes[0] == "a1" and "nothing to check" in run.notes[1]


def test_the_entry_stays_short():
    """api.py runs the registry; the families are wired in registry.py, one class each."""
    tree = ast.parse((Path(__file__).parents[3] / "checkers" / "api.py").read_text())
    lengths = {
        f.name: f.end_lineno - f.lineno + 1
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef) and f.end_lineno is not None
    }
    assert max(lengths.values()) <= 50, lengths


def test_results_json_keeps_its_shape(tmp_path):
    verdict = check(make_run(tmp_path, lose_write=True))
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["status"] == verdict.status == "invalid"
    assert list(written["stats"]) == ["elements", "observer_samples", "admin_ops", "seconds"]
