"""The last things every run does, however it ended: keep the history (closed, with its Parquet
copy), collect the cluster's logs and tear it down (or keep it), and judge the history.

None of these raises for a failure of its own: each says what went wrong and the run keeps what
it has, since the history is the record of the run and must outlive any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusters.cluster import ClusterHandle
from harness.run.recorder import Recorder
from harness.run.rundir import write_json
from history.build import built, describe, finish_run, sides_pending
from history.collection import WHOLE, failure, record_failures
from history.errors import HistoryError
from history.format import JSONL_NAME, PARQUET_NAME
from history.stream import Summary, convert, summary_of

Say = Callable[[str], None]


def keep_history(rec: Recorder, run_dir: Path, say: Say) -> dict[str, int]:
    """Closes the history, builds history.parquet from it and the ops a JVM recorded beside
    it (or, without those, writes its Parquet copy); returns the client operations' counts."""
    counts = dict(rec.counts)
    rec.close()
    merge_sides(run_dir, say)
    _parquet_copy(run_dir, say)
    return counts


def merge_sides(run_dir: Path, say: Say) -> None:
    """The side files of ops recorded in a JVM made one history with the recorder's
    (history/build.py finish_run); a history that cannot be built stays as it is, with its
    side files, and says why."""
    pending = sides_pending(run_dir)
    try:
        done = finish_run(run_dir)
    except (HistoryError, OSError) as exc:
        if pending:
            say(f"warning: the JVM-recorded ops are not in the history: {exc}")
        return
    if done is not None:
        say(describe(done))


def keep_history_file(run_dir: Path, say: Say) -> dict[str, int]:
    """``keep_history`` for a history whose writer died with its process (a crashed client
    host): the file as it is, its torn last line left to the readers' note, merged with the
    sends a JVM recorded beside it as far as they were written; the client operations' counts
    as a Recorder keeps them."""
    merge_sides(run_dir, say)
    summary = _parquet_copy(run_dir, say)
    return {} if summary is None else dict(summary.counts)


def _parquet_copy(run_dir: Path, say: Say) -> Summary | None:
    """The history's Parquet copy written (history/stream.py: a chunk of lines at a time, so a
    history of any length fits); what the pass learned of it, None if it cannot be read. A
    history built from a JVM's side files is its Parquet file already: its summary."""
    if built(run_dir):
        return summary_of(run_dir / PARQUET_NAME)
    try:
        return convert(run_dir / JSONL_NAME, run_dir / PARQUET_NAME)
    # A HistoryError says which line; anything else must not cost the run its record either
    # (the JSONL is the record; the Parquet copy can be rebuilt from it).
    except Exception as exc:
        say(f"warning: no Parquet copy: {exc}")
        return None


def collect_and_tear_down(
    dc: ClusterHandle, name: str, keep: bool, run_dir: Path, say: Say
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
        # The checks read it: what they needed and did not get makes them unknown, not valid.
        record_failures(run_dir, [failure(WHOLE, None, exc)])
        if not keep:
            dc.remove()


def check_run(run_dir: Path, say: Say) -> dict[str, Any]:
    """The checkers' verdict on the run directory (they write results.json themselves)."""
    # Imported here: the checkers pull in pyarrow and, for large histories, Spark.
    from checkers.api import check
    from checkers.core.verdict import CRASHED_EXIT

    try:
        verdict = check(run_dir)
    except Exception as exc:  # a checker bug must not cost the run its recorded history
        say(f"checker crashed: {type(exc).__name__}: {exc}; retry: kchaos check {run_dir}")
        return {"status": "checker crashed", "exit_code": CRASHED_EXIT}
    say(verdict.summary().rstrip())
    out: dict[str, Any] = {"status": verdict.status, "exit_code": verdict.exit_code}
    if verdict.liveness is not None:  # a result class of its own (docs/checkers.md, Liveness)
        out["liveness"] = verdict.liveness.get("status")
    return out


def not_checked(run_dir: Path) -> dict[str, Any]:
    write_json(
        run_dir / "results.json", {"status": "not checked", "reason": "the run did not finish"}
    )
    return {"status": "not checked"}
