"""kchaos analyze across nights: generated run directories (run.json, spec.json, results.json, a
tiny history), grouped by the Kafka release that ran, with crashed and unchecked runs as such."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from checkers.analyze import scenario as scenarios
from checkers.analyze import trends
from checkers.analyze.cli import BAD_INPUT_EXIT, analyze_command
from checkers.analyze.report import analyze, runs_frame
from checkers.analyze.runs import find_runs
from harness.spec import RunSpec, scenario_terms, spec_from_dict
from tests.unit.checkers.histories import H

# The terms `kchaos analyze` is built with (harness/cli/__init__.py): the run options'
# declarations'.
TERMS = scenario_terms()


def scenario(spec: dict) -> str:
    return scenarios.scenario(spec, TERMS)


NO_STATS = pd.DataFrame(columns=["path", "ok", "fail", "info", "faults", "seconds"])


def run_dir(
    parent: Path,
    name: str,
    *,
    status: str | None = "valid",
    ran: str | None = "3.9.2",
    asked: str = "3.9",
    nemesis: tuple[str, ...] = ("partition",),
    kinds: dict[str, int] | None = None,
    crashed: bool = False,
    txn: bool = False,
    ran_faults: tuple[str, ...] | None = None,
) -> Path:
    d = parent / name
    d.mkdir(parents=True)
    h = H().send(0, 1, 1, 0).poll(1, {1: [(0, 1)]})
    h.write(d)
    spec = {"workload": "queue", "topology": "kraft-combined", "version": asked,
            "nemesis": list(nemesis), "seed": int(name.rsplit("-", 1)[-1]), "txn": txn,
            "cluster": "kchaos-run", "time_limit": 30.0}  # fmt: skip
    (d / "spec.json").write_text(json.dumps(spec))
    info: dict = {"seed": spec["seed"], "exit_code": 0}
    if ran:
        info["kafka_version"] = ran
    if crashed:
        info |= {"exit_code": 253, "crashed": {"where": "run", "signal": "SIGSEGV"}}
    (d / "run.json").write_text(json.dumps(info))
    if status is not None:
        counts = {k: {"failing": n} for k, n in (kinds or {}).items()}
        (d / "results.json").write_text(json.dumps({"status": status, "counts": counts}))
    if ran_faults is not None:
        timeline = [{"f": f"start-{f}", "type": "ok", "at_s": 1.0} for f in ran_faults]
        timeline.append({"f": "start-kill", "type": "fail", "at_s": 2.0})
        (d / "nemesis.json").write_text(json.dumps({"timeline": timeline}))
    return d


def campaign(root: Path, night: str) -> Path:
    d = root / "nightly" / night
    d.mkdir(parents=True)
    (d / "campaign.json").write_text(json.dumps({"cells": []}))
    return d


def frame(root: Path) -> pd.DataFrame:
    return runs_frame(find_runs(root, TERMS), NO_STATS)


def test_scenario_is_the_run_without_its_seed_and_where_it_is_kept():
    base = {"workload": "queue", "topology": "kraft-combined", "version": "3.9", "seed": 1,
            "nemesis": ["partition", "kill"], "cluster": "c1", "results_dir": "x"}  # fmt: skip
    assert scenario(base) == "queue/kraft-combined/3.9/kill+partition"
    assert scenario(base | {"seed": 2, "cluster": "c2", "nemesis": "kill,partition"}) == (
        scenario(base)
    )
    assert scenario(base | {"txn": True, "mode": "subscribe", "time_limit": 60.0}) == (
        "queue/kraft-combined/3.9/kill+partition/mode=subscribe,time-limit=60,txn"
    )
    # Defaults spelled out are the same scenario as defaults left out.
    assert scenario(base | {"txn": False, "rate": 50, "quorum": "static"}) == scenario(base)
    assert scenario({"workload": "queue", "version": "4.0", "upgrade_to": "4.1"}) == (
        "queue/kraft-combined/4.0/none/upgrade-to=4.1"
    )


def test_scenario_names_of_stored_specs_are_the_ones_the_hand_copied_defaults_gave():
    """Before the defaults came from the options' declarations, checkers/analyze/scenario.py
    kept a copy of them; each spec.json below is named as that copy named it."""
    admin = {**RunSpec.of(workload="admin", seed=4).to_dict(), "keys": 8, "txn": False}
    cases = {
        "queue/kraft-combined/3.9/none": RunSpec.of(seed=3).to_dict(),
        "admin/kraft-combined/3.9/none": admin,
        "admin/zk/3.9/kill/zookeepers=3": admin | {"topology": "zk", "zookeepers": 3,
                                                   "nemesis": ["kill"]},
        "queue/kraft-combined/4.4/none/client=java,in-flight=50,"
        "send-mode=async,send-recorder=harness": spec_from_dict({
            "version": "4.4", "client": "java", "send_mode": "async", "in_flight": 50,
            "send_recorder": "harness"}).to_dict(),
        "queue/kraft-combined/3.9/none/hosts=/x/hosts.yaml": RunSpec.of(
            hosts="/x/hosts.yaml").to_dict(),
        "queue/kraft-combined/3.9/none/availability=fail,group-protocol=consumer,mode=subscribe,"
        "quorum=dynamic": RunSpec.of(availability="fail", group_protocol="consumer",
                                     mode="subscribe", quorum="dynamic").to_dict(),
        # Defaults spelled out, and the values earlier runs had before an option existed.
        "queue/kraft-combined/3.9/none/keys=3,rate=0": RunSpec.of(
            keys=3, rate=0.0, quorum="static", availability="report", send_mode="sync",
            client="librdkafka", group_protocol="classic", concurrency=4).to_dict(),
        "queue/kraft-combined/3.9/none/replay-of=x": {"workload": "queue", "replay_of": "x",
                                                       "unknown_later": None, "hosts": None},
    }  # fmt: skip
    assert {name: scenario(spec) for name, spec in cases.items()} == {
        name: name.replace("/replay-of=x", "") for name in cases
    }


def test_runs_group_by_the_version_that_ran_and_faults_that_ran(tmp_path):
    run_dir(tmp_path, "20261122T010000-1", ran="3.9.2", ran_faults=("partition",))
    run_dir(tmp_path, "20261122T020000-2", ran="3.9.1", ran_faults=())
    run_dir(tmp_path, "20261122T030000-3", ran=None)
    df = frame(tmp_path).set_index("started")
    assert list(df["version"]) == ["3.9.2", "3.9.1", ""]
    assert list(df["requested_version"]) == ["3.9"] * 3
    assert df.loc["2026-11-22 03:00", "version_shown"] == "? (asked 3.9)"
    # The kill that failed to start did not run; the second run's partition never started.
    assert list(df["nemesis"]) == ["partition", "none", "partition"]
    assert len(set(df["scenario"])) == 1


def test_crashed_and_unchecked_runs_are_never_valid(tmp_path, spark):
    run_dir(tmp_path, "20261122T010000-1", crashed=True, status="valid")
    run_dir(tmp_path, "20261122T020000-2", crashed=True, status="invalid", kinds={"lost-write": 1})
    run_dir(tmp_path, "20261122T030000-3", status=None)
    run_dir(tmp_path, "20261122T040000-4", status="not checked")
    runs = find_runs(tmp_path, TERMS)
    assert [r.status for r in runs] == ["crashed", "invalid", "not checked", "not checked"]
    assert runs[0].crashed == "SIGSEGV during run" and runs[0].checked == "valid"
    assert runs[1].crashed  # its findings stand, and it is still marked crashed
    html = analyze(tmp_path, spark, runs=runs).read_text()
    assert "0 unknown,\n1 crashed, 2 not checked" in html
    assert "crashed: SIGSEGV during run" in html
    assert "invalid (client host crashed: SIGSEGV during run)" in html


def test_flaky_first_failing_version_and_pass_rate_over_last_n(tmp_path):
    for i, night in enumerate(["20261120T010000", "20261121T010000", "20261122T010000"]):
        c = campaign(tmp_path, night)
        run_dir(c, f"queue/{night}-{10 + i}", ran="3.9.2")
        bad = i == 2
        run_dir(c, f"queue/{night}-{20 + i}", ran="4.0.2", status="invalid" if bad else "valid",
                kinds={"lost-write": 2} if bad else None)  # fmt: skip
        run_dir(c, f"queue/{night}-{30 + i}", ran="4.1.2", status="invalid", txn=True,
                kinds={"G1c": 1})  # fmt: skip
    run_dir(tmp_path / "plain", "20261123T050000-40", ran="4.0.2")
    df = frame(tmp_path)
    assert sorted(set(df["night"])) == [
        "2026-11-20 01:00", "2026-11-21 01:00", "2026-11-22 01:00", "2026-11-23 05:00"
    ]  # fmt: skip
    assert set(df[df["night"] == "2026-11-20 01:00"]["campaign"]) == {"nightly"}

    flaky = trends.flaky(df)
    assert flaky.to_dict("records") == [
        {"scenario": "queue/kraft-combined/3.9/partition", "version": "4.0.2", "valid": 3,
         "invalid": 1, "kinds": "lost-write"}
    ]  # fmt: skip

    first = trends.first_failing(df).set_index("scenario")
    assert first.loc["queue/kraft-combined/3.9/partition", "first_failing"] == "4.0.2"
    assert first.loc["queue/kraft-combined/3.9/partition", "passing_below"] == "3.9.2"
    assert first.loc["queue/kraft-combined/3.9/partition/txn", "first_failing"] == "4.1.2"
    assert first.loc["queue/kraft-combined/3.9/partition/txn", "passing_below"] == ""

    rates = trends.pass_rate(df, last=3).set_index("scenario")
    # The last 3 of its 7 runs: night 22's valid 3.9.2 and invalid 4.0.2 runs, night 23's run.
    row = rates.loc["queue/kraft-combined/3.9/partition"]
    assert (row["runs"], row["valid"], row["invalid"]) == (3, 2, 1)
    assert rates.loc["queue/kraft-combined/3.9/partition/txn", "pass_rate"] == 0.0
    assert trends.pass_rate(df, last=10)["runs"].max() == 7

    kinds = trends.kinds_by_night(df)
    lost = kinds[kinds["kind"] == "lost-write"]
    assert lost[["night", "findings"]].to_dict("records") == [
        {"night": "2026-11-22 01:00", "findings": 2}
    ]


def test_versions_sort_as_releases():
    assert sorted(["3.10.0", "3.9.2", "4.0.2", ""], key=trends.version_key) == [
        "3.9.2", "3.10.0", "4.0.2", ""
    ]  # fmt: skip


def test_a_folder_without_runs_says_so_and_exits_254(tmp_path):
    (tmp_path / "empty" / "logs").mkdir(parents=True)
    result = CliRunner().invoke(analyze_command(TERMS), [str(tmp_path / "empty")])
    assert result.exit_code == BAD_INPUT_EXIT == 254
    assert "no runs under" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "empty" / "analysis.html").exists()


def test_two_campaigns_end_to_end_have_trend_sections_plots_and_parquet(tmp_path, spark):
    for i, night in enumerate(["20261121T010000", "20261122T010000"]):
        c = campaign(tmp_path, night)
        run_dir(c, f"queue/{night}-{1 + i}", ran="3.9.2")
        run_dir(c, f"queue/{night}-{3 + i}", ran="4.0.2", status=["valid", "invalid"][i],
                kinds={"lost-write": 1} if i else None)  # fmt: skip
        run_dir(c, f"queue/{night}-{5 + i}", ran="4.0.2", crashed=True)
    (tmp_path / "nightly" / "latest").symlink_to("20261122T010000")
    html_path = analyze(tmp_path, spark, terms=TERMS)
    html = html_path.read_text()
    (tmp_path.parent / "analysis-trends-last.html").write_text(html)  # for a look in a browser
    assert "6 runs, 1 invalid" in html and "2 crashed" in html and "over 2 nights" in html
    for title in (
        "Trends across nights",
        "Each scenario's verdict per night",
        "Pass rate over each scenario's last 10 runs",
        "Flaky scenarios",
        "First failing Kafka version per scenario",
        "Finding kinds over time",
    ):
        assert title in html, title
    assert html.count("<svg") == 3  # verdicts per night, scenario matrix, kinds per night
    for fetch in ('src="http', "src='http", 'href="http', "<script", "<link", "<img"):
        assert fetch not in html  # plots inline, nothing fetched
    for raw in ("failing_findings", "invalid_share", "<th>pass_rate</th>"):
        assert raw not in html
    assert "<th>Pass rate</th>" in html and "<th>First failing version</th>" in html
    assert "6 client operations" not in html  # two client ops per run, counted by Spark:
    assert "12 client operations" in html
    for name in ("runs", "verdict_by_night", "pass_rate", "flaky", "first_failing",
                 "kinds_by_night"):  # fmt: skip
        assert (tmp_path / "analysis" / f"{name}.parquet").exists(), name
    runs = pd.read_parquet(tmp_path / "analysis" / "runs.parquet")
    assert sorted(runs["status"]) == ["crashed", "crashed", "invalid", "valid", "valid", "valid"]
    assert set(runs["version"]) == {"3.9.2", "4.0.2"}
    flaky = pd.read_parquet(tmp_path / "analysis" / "flaky.parquet")
    assert list(flaky["version"]) == ["4.0.2"]
