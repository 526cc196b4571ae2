"""Campaign specs, their matrix, and what a campaign writes (no cluster: the cells' outcomes
are run directories written here the way `kchaos run` writes them). A real campaign runs in
tests/integration/test_campaign.py."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.campaign.report import exit_code, junit_xml, write_all
from harness.campaign.runner import _outcome, new_record, resumed_record
from harness.campaign.spec import expand, load_campaign
from harness.cli import main
from harness.spec import SpecError

REPO = Path(__file__).parents[3]
EXAMPLE = REPO / "examples" / "campaigns" / "example.yaml"


def test_the_example_campaign_expands_to_four_checked_cells():
    camp = load_campaign(EXAMPLE)
    assert len(camp.cells) == 4 and camp.name == "example"
    assert {c.label for c in camp.cells} == {
        "queue / partition / 3.9 / kraft-combined",
        "queue / kill@active-controller / 3.9 / kraft-combined",
        "admin / partition / 3.9 / kraft-combined",
        "admin / kill@active-controller / 3.9 / kraft-combined",
    }
    assert len({c.id for c in camp.cells}) == 4
    # The scenario is the name `kchaos analyze` trends over: the same function names both.
    first = camp.cells[0]
    # A cell is a new run: its queue sends are pipelined (the new defaults, each named).
    assert first.scenario == (
        "queue/kraft-combined/3.9/partition/in-flight=2000,linger-ms=50,nemesis-interval=8,"
        "pollers=2,rate=0,send-mode=async,time-limit=60,timing=fast"
    )


def test_the_clients_campaign_puts_both_clients_under_the_same_faults():
    camp = load_campaign(EXAMPLE.with_name("clients.yaml"))
    assert len(camp.cells) == 8
    java = [c for c in camp.cells if c.options.get("client") == "java"]
    assert len(java) == 4 and all("client=java" in c.scenario for c in java)
    # librdkafka is what a run without the option does: its scenarios name no client.
    assert not any("client=" in c.scenario for c in camp.cells if c not in java)


def test_plan_only_lists_the_cells_and_a_bad_cell_is_refused_naming_it(tmp_path):
    ok = CliRunner().invoke(main, ["campaign", str(EXAMPLE), "--plan-only"])
    assert ok.exit_code == 0, ok.output
    assert "4 cells" in ok.output
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "name: bad\naxes:\n  version: ['3.9', banana]\n  nemesis: [partition]\nseeds: 2\n"
    )
    bad = CliRunner().invoke(main, ["campaign", str(spec), "--plan-only"])
    assert bad.exit_code == 254
    assert "cell banana / partition" in " ".join(bad.output.split())


def test_exclude_seeds_and_owned_options():
    raw = {
        "axes": {"topology": ["kraft-combined", "zk"], "version": ["3.9", "4.1"]},
        "exclude": [{"topology": "zk", "version": "4.1"}],
        "seeds": [5, 9],
    }
    camp = expand(raw)
    assert sorted({c.label for c in camp.cells}) == [
        "kraft-combined / 3.9",
        "kraft-combined / 4.1",
        "zk / 3.9",
    ]
    assert sorted({c.seed for c in camp.cells}) == [5, 9] and len(camp.cells) == 6
    with pytest.raises(SpecError, match="the campaign sets those per cell"):
        expand({"base": {"cluster": "x"}, "axes": {"workload": ["queue"]}})
    with pytest.raises(SpecError, match="every cell of the matrix is excluded"):
        expand({"axes": {"workload": ["queue"]}, "exclude": [{"workload": "queue"}]})
    with pytest.raises(SpecError, match="unknown key"):
        expand({"axis": {}})


def _cell(status: str, **extra) -> dict:
    return {"id": f"00{len(extra)}-x", "scenario": "queue / 3.9", "seed": 1, "status": status,
            **extra}  # fmt: skip


def test_exit_code_is_the_worst_cell():
    assert exit_code([_cell("valid"), _cell("valid")]) == 0
    assert exit_code([_cell("valid"), _cell("crashed")]) == 2
    assert exit_code([_cell("unknown"), _cell("invalid")]) == 1
    assert exit_code([_cell("valid"), _cell("pending")]) == 2


ALLOWED = {
    "testsuites": {"testsuite"},
    "testsuite": {"testsuite", "properties", "testcase", "system-out", "system-err"},
    "properties": {"property"},
    "testcase": {"skipped", "error", "failure", "system-out", "system-err"},
}
REQUIRED = {
    "testsuite": {"name", "tests", "failures", "errors"},
    "testcase": {"name"},
    "property": {"name", "value"},
}


def _schema_errors(element: ET.Element) -> list[str]:
    """junit-10.xsd's rules (Jenkins xunit, what CI servers read) for the elements we write."""
    errors = [
        f"<{element.tag}> lacks {a}"
        for a in REQUIRED.get(element.tag, ())
        if a not in element.attrib
    ]
    for child in element:
        if child.tag not in ALLOWED.get(element.tag, set()):
            errors.append(f"<{child.tag}> may not be inside <{element.tag}>")
        errors += _schema_errors(child)
    return errors


def test_junit_xml_has_a_testcase_per_run_the_findings_and_the_run_dirs():
    record = {
        "campaign": "nightly",
        "started": "2026-11-24T01:00:00+00:00",
        "cells": [
            _cell("valid", run_dir="runs/001/a"),
            {
                **_cell("invalid"),
                "id": "002-x",
                "seed": 2,
                "run_dir": "runs/002/b",
                "summaries": ["[lost-write] op 12 sent 5 to key 1 at offset 3; no poll read it"],
                "reproduced": "1/4",
            },
            {
                **_cell("crashed"),
                "id": "003-x",
                "seed": 3,
                "why": "client host SIGABRT during workload",
            },
            {**_cell("pending"), "id": "004-x", "seed": 4},
        ],
    }
    text = junit_xml(record)
    root = ET.fromstring(text)
    assert _schema_errors(root) == []
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 4 and {c.get("classname") for c in cases} == {"queue / 3_9"}
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message", "").startswith("[seen in 1/4 runs")
    assert "lost-write" in failure.get("message", "")
    error = cases[2].find("error")
    assert error is not None and "SIGABRT" in error.get("message", "")
    assert cases[3].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["run_dir 002-x"] == "runs/002/b"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "1")


def _run_dir(tmp_path: Path, run: dict, results: dict | None) -> Path:
    d = tmp_path / "runs" / "001" / "20261124T010000-1"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(run))
    if results is not None:
        (d / "results.json").write_text(json.dumps(results))
    return d


def test_a_cells_outcome_comes_from_the_run_exit_code_and_its_files(tmp_path):
    finding = {"kind": "lost-write", "explanation": "op 7 was never read", "tolerated": None}
    tolerated = {"kind": "duplicate", "explanation": "x", "tolerated": "retries"}
    d = _run_dir(tmp_path, {"kafka_version": "3.9.2"}, {"findings": [finding, tolerated]})
    out = _outcome(1, d, None)
    assert out["status"] == "invalid" and out["findings"] == ["lost-write"]
    assert out["summaries"] == ["[lost-write] op 7 was never read"]
    crashed = _outcome(253, d, None)
    assert crashed["status"] == "crashed"
    timed_out = _outcome(None, None, "over its 100 s bound: stopped")
    assert timed_out["status"] == "timeout" and "100 s" in timed_out["why"]
    assert _outcome(254, None, None)["status"] == "error"


def test_write_all_leaves_a_record_a_resume_finishes(tmp_path):
    camp = load_campaign(EXAMPLE)
    record = new_record(camp, str(EXAMPLE))
    record["cells"][0].update(status="valid", seconds=70.0, overhead_s=10.0)
    record["cells"][1].update(status="running")
    write_all(tmp_path, record)
    for name in ("campaign.json", "junit.xml", "summary.txt", "campaign.html"):
        assert (tmp_path / name).is_file(), name
    assert "overhead beyond the time limit: median 10 s" in (tmp_path / "summary.txt").read_text()
    again = resumed_record(camp, tmp_path)
    assert [c["status"] for c in again["cells"]] == ["valid", "pending", "pending", "pending"]
    other = expand({"name": "other", "axes": {"workload": ["queue"]}})
    with pytest.raises(SpecError, match="not this spec's cells"):
        resumed_record(other, tmp_path)


FAKE_RUN = """
import json, os, sys, time
from pathlib import Path
spec = json.loads(Path(sys.argv[sys.argv.index("--spec") + 1]).read_text())
plan = json.loads(Path(os.environ["FAKE_PLAN"]).read_text())
codes = plan[spec["name"]]
counter = Path(spec["results_dir"]) / spec["name"] / "count"
counter.parent.mkdir(parents=True, exist_ok=True)
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
code = codes[min(n, len(codes) - 1)]
if code == "hang":
    time.sleep(600)
run_dir = Path(spec["results_dir"]) / spec["name"] / f"20261124T01000{n}-{spec['seed']}"
run_dir.mkdir(parents=True)
findings = [{"kind": "lost-write", "explanation": "op 9 was never read", "tolerated": None}]
(run_dir / "run.json").write_text(json.dumps({"kafka_version": "3.9.2", "exit_code": code}))
(run_dir / "results.json").write_text(json.dumps({"findings": findings if code == 1 else []}))
sys.exit(code)
"""


def _fake_campaign(tmp_path: Path, monkeypatch, plan: dict, **runner) -> tuple[dict, int]:
    """A campaign whose cells are a stand-in for `kchaos run` that exits as ``plan`` says per
    attempt (a cell id's list of exit codes, or "hang"), writing a run directory as it does."""
    from harness.campaign.runner import Runner

    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    camp = expand({"name": "fake", "axes": {"workload": ["queue", "admin"]}}, where="fake")
    ids = [c.id for c in camp.cells]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({ids[i]: codes for i, codes in enumerate(plan.values())}))
    monkeypatch.setenv("FAKE_PLAN", str(plan_file))
    directory = tmp_path / "c"
    directory.mkdir()
    record = new_record(camp, "fake")
    cmd = [sys.executable, str(script)]
    code = Runner(camp, directory, record, say=lambda m: None, command=cmd, **runner).run()
    return json.loads((directory / "campaign.json").read_text()), code


def test_a_failing_cell_deflaked_says_how_often_it_reproduced(tmp_path, monkeypatch):
    record, code = _fake_campaign(
        tmp_path, monkeypatch, {"queue": [1, 0, 0], "admin": [0]}, deflake=2
    )
    flaky, fine = record["cells"]
    assert (flaky["status"], flaky["reproduced"], flaky["flaky"]) == ("invalid", "1/3", True)
    assert len(flaky["attempts"]) == 3 and flaky["findings"] == ["lost-write"]
    assert fine["status"] == "valid" and "attempts" not in fine
    assert code == record["exit_code"] == 1


def test_a_hung_cell_is_stopped_at_its_bound_and_the_campaign_goes_on(tmp_path, monkeypatch):
    from harness.campaign import runner as campaign_runner

    monkeypatch.setattr(campaign_runner, "STOP_GRACE_S", 5.0)
    camp_timeout = 3.0
    original = campaign_runner.Runner.__init__

    def bounded(self, campaign, *args, **kwargs):
        original(self, campaign, *args, **kwargs)
        self.campaign.cell_timeout = camp_timeout

    monkeypatch.setattr(campaign_runner.Runner, "__init__", bounded)
    record, code = _fake_campaign(tmp_path, monkeypatch, {"queue": ["hang"], "admin": [0]})
    hung, fine = record["cells"]
    assert hung["status"] == "timeout" and "over its 3 s bound" in hung["why"]
    assert fine["status"] == "valid" and code == 2


def test_rerun_failed_and_keep_last(tmp_path):
    from harness.campaign.runner import failed_cells, keep_last

    runs = tmp_path / "results" / "nightly"
    for stamp, statuses in (("20261122T010000", ["valid"]), ("20261123T010000", ["valid",
            "invalid"]), ("20261124T010000", ["crashed", "valid"])):  # fmt: skip
        d = runs / stamp
        d.mkdir(parents=True)
        cells = [{"id": f"00{i}", "status": s} for i, s in enumerate(statuses)]
        (d / "campaign.json").write_text(json.dumps({"cells": cells}))
    assert failed_cells(runs / "20261123T010000") == ["001"]
    assert failed_cells(runs / "20261124T010000") == ["000"]
    removed = keep_last(tmp_path / "results", "nightly", 2, lambda m: None)
    assert [p.name for p in removed] == ["20261122T010000"]
    assert sorted(p.name for p in runs.iterdir()) == ["20261123T010000", "20261124T010000"]


def test_parallel_cells_run_on_their_own_clusters_and_subnets(tmp_path, monkeypatch):
    from harness.campaign.runner import slots

    camp = expand({"name": "p", "axes": {"workload": ["queue", "admin"]}, "cluster": "kc",
                   "subnet": "10.213.230.0/24"})  # fmt: skip
    assert [(s.cluster, s.subnet) for s in slots(camp, 2)] == [
        ("kc-0", "10.213.230.0/24"),
        ("kc-1", "10.213.231.0/24"),
    ]
    record, code = _fake_campaign(tmp_path, monkeypatch, {"queue": [0], "admin": [2]}, parallel=2)
    assert [c["status"] for c in record["cells"]] == ["valid", "unknown"] and code == 2
    specs = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("c/runs/*/attempt-1.json"))]
    assert sorted(s["cluster"] for s in specs) == ["kchaos-0", "kchaos-1"]


def _inventory(tmp_path: Path) -> Path:
    import yaml

    path = tmp_path / "hosts.yaml"
    hosts = [
        {"name": f"n{i}", "address": f"192.0.2.{10 + i}", "role": "broker,controller"}
        for i in (1, 2, 3)
    ]
    path.write_text(
        yaml.safe_dump(
            {
                "cluster": "lab",
                "known_hosts": "kh",
                "defaults": {"user": "ops", "key": "id"},
                "hosts": hosts,
            }
        )
    )
    return path


def test_a_campaign_on_hosts_runs_on_the_inventorys_cluster_one_cell_at_a_time(tmp_path):
    from harness.campaign.runner import slots

    hosts = _inventory(tmp_path)
    camp = expand(
        {"name": "lab", "base": {"hosts": str(hosts)}, "axes": {"nemesis": ["kill", "pause"]}},
        where="lab",
    )
    assert camp.hosts == str(hosts.resolve()) and camp.cluster == "lab" and camp.subnet == ""
    spec = camp.cells[0].run_spec(tmp_path / "runs", camp.cluster, camp.subnet)
    assert spec["hosts"] == camp.hosts and spec["cluster"] == "lab" and "subnet" not in spec
    assert [s.cluster for s in slots(camp, 1)] == ["lab"]
    with pytest.raises(SpecError, match="one at a time"):
        slots(camp, 2)


def test_a_campaign_on_hosts_refuses_a_topology_or_subnet_of_its_own(tmp_path):
    hosts = str(_inventory(tmp_path))
    with pytest.raises(SpecError, match="topology 'migration'"):
        expand({"base": {"hosts": hosts}, "axes": {"topology": ["migration"]}}, where="lab")
    with pytest.raises(SpecError, match="come from the inventory"):
        expand({"base": {"hosts": hosts}, "subnet": "10.9.9.0/24"}, where="lab")


def test_before_each_cell_on_hosts_the_cluster_is_taken_down_there(tmp_path, monkeypatch):
    """The stand-in `kchaos` logs its arguments: each cell's run follows a `cluster down
    --hosts` of the campaign's inventory, which heals whatever an earlier cell left."""
    from harness.campaign.runner import Runner

    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    calls = tmp_path / "calls.txt"
    script = tmp_path / "fake_kchaos.py"
    script.write_text(
        "import sys\n"
        f"open({str(calls)!r}, 'a').write(' '.join(sys.argv[1:3]) + '\\n')\n"
        "sys.exit(0)\n"
    )
    hosts = _inventory(tmp_path)
    camp = expand(
        {"name": "lab", "base": {"hosts": str(hosts)}, "axes": {"nemesis": ["kill", "pause"]}},
        where="lab",
    )
    directory = tmp_path / "c"
    directory.mkdir()
    cli = [sys.executable, str(script)]
    Runner(camp, directory, new_record(camp, "lab"), say=lambda m: None, cli=cli).run()
    assert calls.read_text().splitlines() == [
        "cluster down", "run --spec", "cluster down", "run --spec",
    ]  # fmt: skip


FAKE_SHRINK = """
import json, sys
from pathlib import Path
Path(sys.argv[0]).with_name("shrink-args.txt").write_text(" ".join(sys.argv[1:]))
run_dir = Path(sys.argv[2])
d = run_dir.parent / "shrink-20261128T000000"
d.mkdir()
best = {"id": "c0002", "size": {"faults": 1, "time_limit": 12.0}}
(d / "shrink.json").write_text(json.dumps({"status": "done", "runs": 4, "best": "c0002",
                                           "candidates": [best]}))
(d / "shrink.html").write_text("<html></html>")
"""


def test_shrink_failures_shrinks_each_invalid_cell_and_links_it(tmp_path, monkeypatch):
    """After the cells, the stand-in `kchaos shrink` runs on the invalid cell's run only, with
    the budget and the slot's cluster; the record and campaign.html link its shrink.html."""
    script = tmp_path / "fake_shrink.py"
    script.write_text(FAKE_SHRINK)
    record, code = _fake_campaign(
        tmp_path,
        monkeypatch,
        {"queue": [1], "admin": [0]},
        shrink_runs=5,
        cli=[sys.executable, str(script)],
    )
    failing, fine = record["cells"]
    assert code == 1 and "shrink" not in fine
    assert failing["shrink"]["status"] == "done" and failing["shrink"]["size"]["faults"] == 1
    args = (tmp_path / "shrink-args.txt").read_text().split()
    assert args[:2] == ["shrink", str(tmp_path / "c" / failing["run_dir"])]
    assert args[args.index("--max-runs") + 1] == "5" and "--cluster" in args
    page = (tmp_path / "c" / "campaign.html").read_text()
    assert f"href='{failing['shrink']['html']}'" in page and "1 fault(s), 12 s" in page
    assert "shrink done" in (tmp_path / "c" / "summary.txt").read_text()
