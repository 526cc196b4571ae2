"""kchaos analyze over a few small generated runs, through the session's Spark."""

from __future__ import annotations

import re

from checkers.analyze.report import analyze
from checkers.analyze.runs import find_runs
from checkers.api import check
from harness.spec import scenario_terms
from tests.unit.checkers.runs import make_run

TERMS = scenario_terms()


def test_cross_run_report_groups_and_links_the_worst_run(tmp_path, spark):
    night = tmp_path / "results"
    bad = make_run(night / "queue" / "20261122T014500-1", seed=1, lose_write=True)
    make_run(night / "queue" / "20261122T020000-2", seed=2, nemesis="kill", version="4.0.0")
    make_run(night / "queue" / "20261123T010000-3", seed=3)
    for run in sorted((night / "queue").iterdir()):
        check(run, engine="pandas")
    (night / "latest").symlink_to("queue/20261122T014500-1")

    runs = find_runs(night, TERMS)
    assert len(runs) == 3  # results/latest is not a fourth run
    html = analyze(night, spark, terms=TERMS).read_text()
    (tmp_path.parent / "analysis-last.html").write_text(html)  # for a look in a browser
    assert "3 runs, 1 invalid" in html
    # The worst run comes first, linked to its own report.
    first = re.search(r'<a href="([^"]+)">', html)
    assert first and first[1] == "queue/20261122T014500-1/report.html"
    assert (night / first[1]).resolve() == (bad / "report.html").resolve()
    assert "lost-write (1)" in html
    for text in ("By workload", "By nemesis", "By version", "4.0.0", "kill", "2026-11-23"):
        assert text in html
    # Client ops are counted by Spark: 60 per generated run, 3 more in the lost-write one.
    assert "183 client operations" in html
    assert "63/0/0" in html
