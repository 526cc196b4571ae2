"""A campaign's reports carry the liveness verdict as an outcome of its own
(docs/checkers.md, Liveness): junit.xml's failure of type liveness, or a system-err line."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.campaign.report import junit_xml
from tests.unit.harness.test_campaign import _cell, _schema_errors

HUNG = ["[no-progress] no send op succeeded from 5.000 s ..."]


def _record(*cells: dict) -> dict:
    return {"campaign": "nightly", "started": "2026-11-28T01:00:00+00:00", "cells": list(cells)}


def test_a_hang_that_fails_its_run_is_a_liveness_failure_and_a_reported_one_a_note():
    failing = {
        **_cell("invalid"),
        "id": "001-a",
        "findings": ["no-progress"],
        "summaries": HUNG,
        "liveness": "hang",
        "liveness_fails_run": True,
        "liveness_kinds": ["no-progress"],
        "liveness_summaries": HUNG,
    }
    reported = {**failing, "id": "002-b", "status": "valid", "findings": [], "summaries": []}
    reported["liveness_fails_run"] = False
    unsafe = {**failing, "id": "003-c", "findings": ["lost-write", "no-progress"]}
    live = {**_cell("valid"), "id": "004-d", "liveness": "live", "run_dir": "runs/4"}
    root = ET.fromstring(junit_xml(_record(failing, reported, unsafe, live)))
    assert _schema_errors(root) == []
    cases = root.findall("testsuite/testcase")
    [only] = cases[0].findall("failure")
    assert only.get("type") == "liveness" and "no-progress" in only.get("message", "")
    assert cases[1].find("failure") is None
    assert "reported, not failing" in (cases[1].findtext("system-err") or "")
    assert [f.get("type") for f in cases[2].findall("failure")] == ["invalid"]
    assert "liveness hang" in (cases[2].findtext("system-err") or "")
    assert cases[3].find("system-err") is None and cases[3].find("failure") is None
    assert root.get("failures") == "2"


def test_campaign_html_marks_hangs_and_sums_coverage_per_scenario():
    from harness.campaign.report import campaign_html

    a = {**_cell("valid"), "id": "001-a", "seed": 1, "liveness": "hang", "coverage": {"x": 2}}
    b = {**_cell("valid"), "id": "002-b", "seed": 2, "coverage": {"x": 0, "y": 1}}
    page = campaign_html(_record(a, b))
    assert "liveness hang" in page
    assert "<h2>Coverage</h2>" in page and "<td>1 / 2</td><td>1 / 1</td>" in page


def test_a_run_that_missed_its_required_states_is_marked_not_exercised():
    from harness.campaign.report import campaign_html

    cell = {**_cell("valid"), "id": "001-a", "not_exercised": ["broker-fenced"]}
    root = ET.fromstring(junit_xml(_record(cell)))
    assert _schema_errors(root) == []
    assert "did not reach broker-fenced" in (root.findtext("testsuite/testcase/system-err") or "")
    assert "not exercised" in campaign_html(_record(cell))
