"""The last things every run does, however it ended: keep the history (closed, with its Parquet
copy), collect the cluster's logs and tear it down (or keep it), and judge the history.

None of these raises for a failure of its own: each says what went wrong and the run keeps what
it has, since the history is the record of the run and must outlive any of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusters.docker_cluster import DockerCluster
from harness.recorder import Recorder
from harness.rundir import write_json
from history.columnar import write_parquet
from history.errors import HistoryError
from history.format import INVOKE, JSONL_NAME, PARQUET_NAME, SPECIAL_PROCESSES
from history.reader import History, read_history

Say = Callable[[str], None]


def keep_history(rec: Recorder, run_dir: Path, say: Say) -> dict[str, int]:
    """Closes the history and writes its Parquet copy; returns the client operations' counts."""
    counts = dict(rec.counts)
    rec.close()
    _parquet_copy(run_dir, say)
    return counts


def keep_history_file(run_dir: Path, say: Say) -> dict[str, int]:
    """``keep_history`` for a history whose writer died with its process (a crashed client
    host): the file as it is, its torn last line left to the readers' note; the client
    operations' counts as a Recorder keeps them."""
    history = _parquet_copy(run_dir, say)
    if history is None:
        return {}
    counts = Counter(
        op["type"]
        for op in history.ops
        if op["type"] != INVOKE and op["process"] not in SPECIAL_PROCESSES
    )
    return dict(counts)


def _parquet_copy(run_dir: Path, say: Say) -> History | None:
    """The history as read back, after writing its Parquet copy; None if it cannot be read."""
    try:
        history = read_history(run_dir / JSONL_NAME)
    except HistoryError as exc:
        say(f"warning: no Parquet copy: {exc}")
        return None
    try:
        write_parquet(history, run_dir / PARQUET_NAME)
    except Exception as exc:  # the JSONL is the record; Parquet can be rebuilt from it
        say(f"warning: no Parquet copy: {exc}")
    return history


def collect_and_tear_down(
    dc: DockerCluster, name: str, keep: bool, run_dir: Path, say: Say
) -> None:
    """Logs and decoded metadata into the run directory; the cluster down unless ``keep``."""
    try:
        if keep:
            from clusters.collect import collect_cluster

            collect_cluster(dc, run_dir, say=say)
            say(f"cluster '{name}' kept (--keep-cluster)")
        else:
            dc.down(collect=run_dir, say=say)
    except Exception as exc:
        say(f"warning: collecting or tearing down failed: {exc}")
        if not keep:
            dc.remove()


def check_run(run_dir: Path, say: Say) -> dict[str, Any]:
    """The checkers' verdict on the run directory (they write results.json themselves)."""
    # Imported here: the checkers pull in pyarrow and, for large histories, Spark.
    from checkers.api import check
    from checkers.verdict import CRASHED_EXIT

    try:
        verdict = check(run_dir)
    except Exception as exc:  # a checker bug must not cost the run its recorded history
        say(f"checker crashed: {type(exc).__name__}: {exc}; retry: kchaos check {run_dir}")
        return {"status": "checker crashed", "exit_code": CRASHED_EXIT}
    say(verdict.summary().rstrip())
    return {"status": verdict.status, "exit_code": verdict.exit_code}


def not_checked(run_dir: Path) -> dict[str, Any]:
    write_json(
        run_dir / "results.json", {"status": "not checked", "reason": "the run did not finish"}
    )
    return {"status": "not checked"}
