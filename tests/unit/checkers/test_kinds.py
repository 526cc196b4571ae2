"""checkers/core/kinds.py lists every anomaly kind the checkers can report, and docs/checkers.md
names each: found in the source (kind_scan) and by running the checkers over test histories
(here, and in every test of this folder: conftest.kinds_are_listed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from checkers.api import check
from checkers.core.findings import Finding
from checkers.core.kinds import (
    ALWAYS,
    BY_NAME,
    CANNOT_TELL,
    DEPENDS,
    FAILS,
    KINDS,
    NEVER,
    TOLERATED,
    UNKNOWN,
)
from checkers.families.cycles import SPECS
from checkers.families.queue.policy import (
    ALWAYS_TOLERATED,
    JEPSEN_TOLERATED,
    SUBSCRIBE_TOLERATED,
)
from checkers.families.queue.rules import RULES
from checkers.registry import REGISTRY
from checkers.table_check import check_table
from history.columnar import to_table
from tests.unit.checkers.histories import H, mixed_anomalies
from tests.unit.checkers.kind_scan import scan
from tests.unit.checkers.metalogs import dump, healthy
from tests.unit.checkers.model import CONCURRENCY, INJECTIONS, run_model
from tests.unit.checkers.runs import make_run

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).parent / "data"
# Kinds built with f-strings in checkers/families/queue/rules/ (the queue engines' modules; reported
# to be spelled out whole): what each yields, for `kind` "poll" or "send".
SCAN = scan()


def _reported_in_source() -> set[str]:
    return set(SCAN.kinds) | set(SCAN.constants)


def test_every_kind_the_source_reports_is_listed():
    assert SCAN.unresolved == [], "kind arguments the scan cannot follow: spell them out"
    assert sorted(_reported_in_source() - set(BY_NAME)) == []


def test_kinds_are_spelled_whole():
    assert SCAN.unspelled == {}, "a kind built from pieces cannot be grepped: write it out whole"


def test_every_listed_kind_is_reported_somewhere():
    assert sorted(set(BY_NAME) - _reported_in_source()) == []
    assert len(BY_NAME) == len(KINDS), "a kind listed twice"


def test_every_listed_kind_is_in_the_docs():
    docs = (ROOT / "docs" / "checkers.md").read_text()
    assert [k.name for k in KINDS if f"`{k.name}`" not in docs] == []


def test_each_kind_names_registered_checkers():
    names = {c.name for c in REGISTRY}
    assert [k.name for k in KINDS if not k.checkers or set(k.checkers) - names] == []
    assert all(k.rule and k.source for k in KINDS)
    for k in KINDS:
        outcomes = (k.tolerance.kchaos, k.tolerance.subscribe, k.tolerance.jepsen)
        assert set(outcomes) <= {FAILS, TOLERATED, UNKNOWN, DEPENDS}, k.name
        assert (DEPENDS in outcomes) == bool(k.tolerance.when), k.name


def test_tolerances_are_the_policys():
    """The table states what queue/policy.py and cycles.py decide; it decides nothing."""
    queue_kinds = {kind for rule in RULES for kind in rule.KINDS}
    assert {k.name for k in KINDS if "queue" in k.checkers} == queue_kinds
    for name in queue_kinds:
        t = BY_NAME[name].tolerance
        assert (t.kchaos == TOLERATED) == (name in ALWAYS_TOLERATED), name
        expected = name in ALWAYS_TOLERATED or name in SUBSCRIBE_TOLERATED
        assert (t.subscribe == TOLERATED) == expected, name
    for name in JEPSEN_TOLERATED:
        assert BY_NAME[name].tolerance.jepsen == TOLERATED
    assert BY_NAME["unseen"].tolerance.kchaos == UNKNOWN
    assert BY_NAME["unseen"].tolerance.jepsen == FAILS  # policy.for_writer
    for spec in SPECS:
        t = BY_NAME[spec.kind].tolerance
        if spec.kind.startswith("G0"):
            assert t == ALWAYS and spec.tolerated
        else:
            assert t.kchaos == DEPENDS


def _consistent(f: Finding) -> bool:
    """A finding's outcome is one its kind allows in any mode."""
    t = BY_NAME[f.kind].tolerance
    if t == NEVER:
        return f.tolerated is None and not f.unknown
    if t == ALWAYS:
        return f.tolerated is not None
    if t == CANNOT_TELL:
        return f.unknown and f.tolerated is None
    return True


def _run_dirs(tmp: Path) -> list[Path]:
    """Run directories that reach every family: observer samples and a lost write, ZooKeeper
    brokers' logs with and without elections, unreadable logs, logs with nothing committed, and
    a Jepsen history."""
    lost = make_run(tmp / "lost", seed=2, lose_write=True)
    zk = tmp / "zk"
    shutil.copytree(DATA / "zk_failover", zk)
    make_run(zk, seed=1)
    broken = make_run(tmp / "broken", seed=3)
    for logs, text in (("metadata", dump(healthy()).replace("{", "{{")), ("data", "Dumping x\n")):
        (broken / logs).mkdir()
        (broken / logs / "n1.txt").write_text(text)
    blind = tmp / "blind"  # nothing committed in the metadata logs, no ZooKeeper election
    (blind / "metadata").mkdir(parents=True)
    (blind / "metadata" / "n1.txt").write_text(dump(healthy()))
    nodes = [{"name": "n1", "roles": ["controller"]}, {"name": "n2", "roles": ["controller"]}]
    nodes.append({"name": "b1", "roles": ["broker"]})
    (blind / "cluster.json").write_text(json.dumps({"topology": "zk", "nodes": nodes}))
    H().send(0, 0, 1, 0).poll(1, {0: [(0, 1)]}).write(blind)
    jepsen = tmp / "jepsen"
    jepsen.mkdir()
    shutil.copy(DATA / "jepsen_kafka_history.edn", jepsen / "history.edn")
    return [lost, zk, broken, blind, jepsen / "history.edn"]


def test_the_checkers_over_test_histories_report_only_listed_kinds(tmp_path):
    findings = [f for d in _run_dirs(tmp_path) for f in check(d, write=False).findings]
    for kind, inject in INJECTIONS.items():
        m = run_model([], final_poll=False)
        inject(m, 0)
        if kind != "unseen":
            m.final_poll()
        findings += check_table(m.table(), slots=CONCURRENCY)
    findings += check_table(to_table(mixed_anomalies().history()))
    kinds = {f.kind for f in findings}
    assert sorted(kinds - set(BY_NAME)) == []
    assert [f.kind for f in findings if not _consistent(f)] == []
    # The histories above do reach far: most families, and every injected queue bug.
    assert set(INJECTIONS) <= kinds
    # The histories above do reach far: every injected queue bug, and each family's own kinds.
    assert set(INJECTIONS) <= kinds
    logs = {"data-log-unreadable", "metadata-log-unreadable", "metadata-log-unknown"}
    assert logs | {"zk-controller-epochs-unknown"} <= kinds


@pytest.mark.parametrize("kind", [k.name for k in KINDS])
def test_the_docs_table_lists_each_kind_with_its_checker(kind):
    table = (ROOT / "docs" / "checkers.md").read_text().split("## Every anomaly kind", 1)[-1]
    row = next((line for line in table.splitlines() if line.startswith(f"| `{kind}` |")), None)
    assert row is not None, kind
    assert all(c in row for c in BY_NAME[kind].checkers), row
