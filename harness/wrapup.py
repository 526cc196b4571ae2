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
from history.merge import merge_run, pending
from history.reader import History, read_history

Say = Callable[[str], None]


def keep_history(rec: Recorder, run_dir: Path, say: Say) -> dict[str, int]:
    """Closes the history, merges into it the sends a JVM recorded beside it, and writes its
    Parquet copy; returns the client operations' counts."""
    counts = dict(rec.counts)
    rec.close()
    merge_sides(run_dir, say)
    _parquet_copy(run_dir, say)
    return counts


def merge_sides(run_dir: Path, say: Say) -> None:
    """The side files of sends recorded in a JVM merged into the history (history/merge.py);
    a history that cannot be merged stays as it is, with its side files, and says why."""
    if not pending(run_dir):
        merge_run(run_dir)  # at most the clean-up of a merge cut short
        return
    try:
        done = merge_run(run_dir)
    except (HistoryError, OSError) as exc:
        say(f"warning: the JVM-recorded sends were not merged into the history: {exc}")
        return
    if done is not None:
        torn = f"; torn last line dropped: {', '.join(done.torn)}" if done.torn else ""
        say(f"history: {done.side_ops} JVM-recorded send ops merged{torn}")


def keep_history_file(run_dir: Path, say: Say) -> dict[str, int]:
    """``keep_history`` for a history whose writer died with its process (a crashed client
    host): the file as it is, its torn last line left to the readers' note, merged with the
    sends a JVM recorded beside it as far as they were written; the client operations' counts
    as a Recorder keeps them."""
    merge_sides(run_dir, say)
    history = _parquet_copy(run_dir, say)
    if history is None:
        return {}
    counts = Counter(
        op["type"]
        for op in history.ops
        if op["type"] != INVOKE and op["process"] not in SPECIAL_PROCESSES
    )
    return dict(counts)


# What reading a history.jsonl into memory (history/reader.py, then its Parquet copy) takes per
# byte of the file, measured on JVM-recorded send lines (1M sends, 308 MB: 3.6 GB for the read,
# 4.4 GB with the copy), with room to spare.
READ_BYTES_PER_BYTE = 16
# The share of the machine's available memory a run's own reading may take.
READ_SHARE = 0.8


def too_big_to_read(run_dir: Path) -> str | None:
    """Why the run's history is not read here (its Parquet copy, the check), or None. A run
    whose sends its JVM recorded may hold millions of ops (half a million a second unpaced),
    which the reader and the checkers' own read hold in memory whole: reading one beyond the
    machine's available memory would kill the run's process, so it is left to `kchaos check`
    on a machine that can."""
    try:
        size = (run_dir / JSONL_NAME).stat().st_size
    except OSError:
        return None
    need = size * READ_BYTES_PER_BYTE
    avail = _available_memory()
    if avail is None or need <= READ_SHARE * avail:
        return None
    return (
        f"history.jsonl is {size / 1e9:.1f} GB: reading it takes ~{need / 1e9:.0f} GB, and this "
        f"machine has {avail / 1e9:.1f} GB available; check it where there is more: "
        f"kchaos check {run_dir}"
    )


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _parquet_copy(run_dir: Path, say: Say) -> History | None:
    """The history as read back, after writing its Parquet copy; None if it cannot be read."""
    too_big = too_big_to_read(run_dir)
    if too_big is not None:
        say(f"warning: no Parquet copy: {too_big}")
        return None
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
    from checkers.verdict import CRASHED_EXIT, EXIT_CODES, UNKNOWN

    too_big = too_big_to_read(run_dir)
    if too_big is not None:
        say(f"not checked: {too_big}")
        write_json(run_dir / "results.json", {"status": "not checked", "reason": too_big})
        # Not a verdict, and not a valid one: the exit code of one that cannot say.
        return {"status": "not checked", "reason": too_big, "exit_code": EXIT_CODES[UNKNOWN]}

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
