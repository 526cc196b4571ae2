"""The entry the harness calls: check one stored history, write results.json and summary.txt.

from checkers.api import check
verdict = check("results/queue/20261122T014500-42")   # or a history.jsonl / .parquet
verdict.exit_code                                     # 0 valid, 1 invalid, 2 unknown

The checkers themselves are listed in checkers/registry.py; this module runs them over one
run's inputs (checkers/core/inputs.py), composes their results (checkers/core/checker.py) and takes
the verdict (checkers/core/verdict.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from checkers.core.checker import compose, run_checkers
from checkers.core.inputs import RunInputs
from checkers.core.memory import reused_memory
from checkers.core.verdict import Verdict, decide
from checkers.registry import REGISTRY

__all__ = ["check"]


def check(
    history_path_or_run_dir: str | Path,
    spark_master: str | None = None,
    *,
    engine: str = "auto",
    write: bool = True,
    spark: Any = None,
) -> Verdict:
    """Check a stored history. Raises HistoryError for a history that cannot be read.

    engine: "local" (vectorised numpy, in this process; "pandas" is its old name), "spark"
    (local[*] unless `spark_master`), "reference" (the per-key Python path, slow), or "auto"
    (Spark when a master is given, else local; see inputs.ENGINES). `spark`: an existing
    SparkSession to reuse.
    """
    with reused_memory():
        return _check(history_path_or_run_dir, spark_master, engine, write, spark)


def _check(
    path: str | Path, spark_master: str | None, engine: str, write: bool, spark: Any
) -> Verdict:
    started = time.monotonic()
    with RunInputs.open(path, engine, spark_master, spark) as inputs:
        results = run_checkers(REGISTRY, inputs)
        run = compose(results, inputs.after_abort, inputs.names)
    verdict = Verdict(
        status=decide(run.findings, run.checked),
        findings=run.findings,
        notes=inputs.notes + run.notes,
        history=inputs.history_name,
        engine=inputs.engine,
        stats={**run.stats, "seconds": round(time.monotonic() - started, 3)},
        liveness=results["liveness"].outputs.get("liveness") if "liveness" in results else None,
        coverage=results["coverage"].outputs.get("coverage") if "coverage" in results else None,
    )
    if write:
        # The verdict first: whatever becomes of the report, results.json is on disk.
        verdict.write(inputs.run_dir)
        # Whatever the history's size: the report folds it a row group at a time
        # (checkers/report/data.py).
        if not _write_report(inputs.run_dir, inputs.parquet, verdict):
            verdict.write(inputs.run_dir)  # again, with the note saying why there is no report
    return verdict


def _write_report(out_dir: Path, parquet: Path, verdict: Verdict) -> bool:
    from checkers.report.render import write_report  # matplotlib: only when writing

    try:
        write_report(out_dir, parquet, verdict)
    except Exception as e:  # the report is for people; its failure must not cost the verdict
        verdict.notes.append(f"report.html not written: {type(e).__name__}: {e}")
        return False
    return True
