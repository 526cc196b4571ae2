"""`evidence-not-collected` (checkers/families/collection.py): a run whose final collection
failed is unknown for that stated reason, not valid on what the history alone shows."""

from __future__ import annotations

import json

from checkers.api import check
from history.collection import (
    COLLECTION_JSON,
    DATA_LOGS,
    METADATA_LOGS,
    failure,
    read_failures,
    record_failures,
)
from tests.unit.checkers.histories import H


def healthy() -> H:
    return H().send(0, 0, 10, 0).send(1, 0, 11, 1).poll(2, {0: [(0, 10), (1, 11)]})


def test_a_healthy_run_whose_collection_had_no_failure_is_valid(tmp_path):
    healthy().write(tmp_path)
    verdict = check(tmp_path, write=False)
    assert verdict.status == "valid"
    assert not [n for n in verdict.notes if n.startswith("collection:")]


def test_a_failed_metadata_and_data_collection_is_a_note_and_unknown_naming_the_checks(tmp_path):
    healthy().write(tmp_path)
    record_failures(tmp_path, [failure(METADATA_LOGS, None, RuntimeError("decoder died"))])
    record_failures(tmp_path, [failure(DATA_LOGS, ["n2"], "DumpLogSegments failed in n2-raw")])
    verdict = check(tmp_path)
    assert verdict.status == "unknown"
    found = [f for f in verdict.findings if f.kind == "evidence-not-collected"]
    assert [(f.data["what"], f.data["nodes"], f.unknown) for f in found] == [
        ("metadata-logs", None, True),
        ("data-logs", ["n2"], True),
    ]
    assert "eligible-leaders" in found[0].data["checks"] and "RuntimeError: decoder died" in (
        found[0].explanation
    )
    notes = [n for n in verdict.notes if n.startswith("collection:")]
    assert notes[1] == (
        "collection: the brokers' decoded partition logs (data/) of n2 not collected: "
        f"DumpLogSegments failed in n2-raw ({COLLECTION_JSON})"
    )
    # results.json and the report say the same.
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["status"] == "unknown" and notes[0] in results["notes"]
    assert "decoder died" in (tmp_path / "report.html").read_text()


def test_a_failing_finding_still_makes_the_run_invalid(tmp_path):
    # Value 11 acknowledged at offset 1 and never read: a lost write.
    H().send(0, 0, 10, 0).send(1, 0, 11, 1).poll(2, {0: [(0, 10)]}).poll(2, {0: [(2, 12)]}).send(
        1, 0, 12, 2
    ).write(tmp_path)
    record_failures(tmp_path, [failure(DATA_LOGS, None, "no JDK")])
    assert check(tmp_path, write=False).status == "invalid"


def test_an_unreadable_collection_record_is_itself_a_failure_of_the_whole_collection(tmp_path):
    (tmp_path / COLLECTION_JSON).write_text('{"failed": [{"what": "elsewhere"}]}')
    (entry,) = read_failures(tmp_path)
    assert entry["what"] == "all" and entry["why"].startswith(f"{COLLECTION_JSON} unreadable")
