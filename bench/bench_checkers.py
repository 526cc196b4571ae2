"""Checker throughput on synthetic valid histories: ops/s, peak memory, check/read ratio.

    .venv/bin/python -m bench.bench_checkers --ops 1000000 10000000                 # local
    .venv/bin/python -m bench.bench_checkers --ops 1000000 10000000 --engines local,spark
    .venv/bin/python -m bench.bench_checkers --ops 10000000 100000000   # streamed at 100M

Writes bench/out/results.json. Each size is generated once (in a process of its own) and
checked by each engine `--repeat` times (default 3), each time in a fresh child process, so
that each peak RSS is its own (ru_maxrss never goes down) and no check finds pages an earlier
one left. In the child the file is first read once untimed (the page cache then holds it for
the check and the reads alike), then the check is timed once (and its peak RSS taken), then
each read three times. The row of a size reports the median check and the median read over
all children, every time beside them: on a shared VM single checks and reads vary up to 2x.

- `full_read_s`: `pq.read_table(path)`, every column of every row: the history read once. The
  headline `ratio` is check time / `full_read_s` (issue 4: "the time of merely reading the
  Parquet history once").
- `narrow_read_s`: `pq.read_table(path, columns=CHECK_COLUMNS)`, only the columns the local
  check decodes for every row; `ratio_to_narrow_read` is check time over it, for reference.
- `fresh_full_read_s`: the same full read as the first thing a fresh child does (one per
  `--repeat`, median), in the state the check itself starts from: no page the read fills has
  been touched before. The reads above follow the check in its child and reuse the memory it
  freed, so they pay fewer first-touch faults than the check did; `ratio_to_fresh_read` is
  check time over this one. The headline `ratio` stays the one over the warm reads, the
  stricter of the two.

Histories bigger than the local engine holds (more element rows than
checkers.scan.load.STREAM_ABOVE: the check streams them, docs/checkers.md) cannot be read whole
either (at 100M ops `pq.read_table` would hold about 15 GB): for them every read above is a read of
each row group in turn, every column (or the check columns) decoded and dropped (`read` in the row
says which), and each child reads once per kind instead of three times (a read of 100M ops is
~15 s). The row's `streamed_buckets` is the number of buckets the check streamed (0: held whole).
The file is put in the page cache by a read in pieces, never held.

The Spark session is started before timing (its start-up is reported apart, `spark_startup_s`).
Imports are the process's, not the check's or the read's: the checker's are done before
timing, and so is pandas, which pyarrow imports on its first conversion to numpy or read of a
Parquet file (Schema.empty_table, ChunkedArray.to_numpy, pq.read_table: 0.13-0.17 s here).
Until the queue checks stopped importing pandas themselves, it came with the checker's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported by pyarrow anyway: see the docstring)
import pyarrow.parquet as pq

from checkers.api import check
from checkers.scan import load as loading
from history.columnar import CHECK_COLUMNS, element_rows_at_most

OUT = Path(__file__).parent / "out"
ENGINES = ("local", "spark")


def _descendants_peak_kib() -> int:
    """Sum of the peak RSS (VmHWM) of our live descendants: the Spark JVM and its workers."""
    me, total = os.getpid(), 0
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = dict(
                    line.split(":", 1) for line in (d / "status").read_text().splitlines()
                )
                parents[int(d.name)] = int(fields["PPid"])
                if int(d.name) != me and _descends(int(d.name), me, parents):
                    total += int(fields.get("VmHWM", "0 kB").split()[0])
            except (OSError, KeyError, ValueError):
                continue
    return total


def _descends(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    while pid in parents and pid > 1:
        pid = parents[pid]
        if pid == ancestor:
            return True
    try:  # parents may not be read yet: ask the kernel directly
        ppid = int(Path(f"/proc/{pid}/stat").read_text().split()[3])
        return ppid == ancestor or (ppid > 1 and _descends(ppid, ancestor, parents))
    except (OSError, ValueError, IndexError):
        return False


def _engines(text: str) -> list[str]:
    names = [e.strip() for e in text.split(",") if e.strip()]
    bad = [e for e in names if e not in ENGINES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"engines: a comma list of {', '.join(ENGINES)}")
    return names


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--engines", type=_engines, default=["local"], help="e.g. local,spark")
    ap.add_argument("--spark-master", default=None)
    ap.add_argument("--repeat", type=int, default=3, help="checks per size and engine")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child: check this file, one engine
    ap.add_argument("--read", help=argparse.SUPPRESS)  # a child: time one fresh full read
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.read:
        path = Path(args.read)
        _into_page_cache(path)  # as for the check
        read, _ = _reader(path)
        print(json.dumps({"fresh_full_read_s": _timed(lambda: read(None), 1)[0]}))
    elif args.one:
        _child(Path(args.one), args.ops[0], args.engines[0], args.spark_master)
    else:
        _parent(args)


def _into_page_cache(path: Path) -> None:
    """Read the file once, in pieces: the check and the reads then find it in the page cache,
    and no copy of it counts in this process's peak RSS."""
    with path.open("rb", buffering=0) as f:
        piece = bytearray(1 << 24)
        while f.readinto(piece):
            pass


def _reader(path: Path) -> tuple[Callable[[list[str] | None], object], str]:
    """(read(columns): the history read once, every column when None; how). Whole for a
    history the local engine holds; row group by row group, each dropped, for one it streams."""
    if element_rows_at_most(path) <= loading.STREAM_ABOVE:
        return lambda columns: pq.read_table(path, columns=columns), "pq.read_table"

    def by_row_group(columns: list[str] | None) -> None:
        pf = pq.ParquetFile(path)
        for i in range(pf.num_row_groups):
            pf.read_row_group(i, columns=columns)

    return by_row_group, "each row group in turn (ParquetFile.read_row_group)"


def _timed(fn: Callable[[], object], times: int = 3) -> list[float]:
    """Seconds of each of `times` calls, in order."""
    out = []
    for _ in range(times):
        t = time.monotonic()
        fn()
        out.append(round(time.monotonic() - t, 3))
    return out


def _child(path: Path, ops: int, engine: str, spark_master: str | None) -> None:
    spark, startup = None, 0.0
    if engine == "spark":
        from checkers.scan.spark_session import spark_session

        t = time.monotonic()
        spark = spark_session(spark_master)
        startup = time.monotonic() - t
    _into_page_cache(path)  # the check and the reads below all find it there
    load_before = os.getloadavg()[0]  # the machine is shared: what ran beside the check
    t = time.monotonic()
    verdict = check(path, spark_master, engine=engine, spark=spark, write=False)
    checked = time.monotonic() - t
    # Taken before the reads: a full read of 10M ops holds more than the check ever does.
    children = _descendants_peak_kib()
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    read, how = _reader(path)
    times = 3 if how == "pq.read_table" else 1
    fulls = _timed(lambda: read(None), times)
    narrows = _timed(lambda: read(CHECK_COLUMNS), times)
    full, narrow = statistics.median(fulls), statistics.median(narrows)
    row = {
        "ops": ops,
        "engine": engine,
        "status": verdict.status,
        "check_s": round(checked, 3),
        "ops_per_s": round(ops / checked),
        "full_read_s": round(full, 3),
        "narrow_read_s": round(narrow, 3),
        "full_reads_s": fulls,
        "narrow_reads_s": narrows,
        "ratio": round(checked / full, 2),
        "ratio_uses": "full_read_s: the history read once (`read`), every column",
        "ratio_to_narrow_read": round(checked / narrow, 2),
        "narrow_read": f"{len(CHECK_COLUMNS)} check columns",
        "read": how,
        "streamed_buckets": verdict.stats.get("streamed_buckets", 0),
        "driver_peak_mib": driver // 1024,
        "children_peak_mib": children // 1024,
        "peak_rss_mib": (driver + children) // 1024,
        "spark_startup_s": round(startup, 2),
        "cpus": os.cpu_count(),
        "load_avg_1m_before": load_before,
        "load_avg_1m": os.getloadavg()[0],
    }
    print(json.dumps(row), flush=True)


def _parent(args: argparse.Namespace) -> None:
    """Each size generated once and checked by each engine `--repeat` times, each time in a
    child of its own; the medians, then the cost of the largest size against the smallest,
    per engine."""
    rows = []
    for n in args.ops:
        path = OUT / f"synthetic-{n}.parquet"
        t = time.monotonic()
        # Generated in a process of its own: its arrays must not count in the check's peak RSS.
        gen = [sys.executable, "-c", f"from bench.synthetic import write_synthetic as w; "
               f"print(w({str(path)!r}, {n}))"]  # fmt: skip
        ops = int(subprocess.run(gen, check=True, capture_output=True, text=True).stdout)
        generated = round(time.monotonic() - t, 2)
        try:
            for engine in args.engines:
                cmd = [sys.executable, "-m", "bench.bench_checkers", "--one", str(path)]
                cmd += ["--ops", str(ops), "--engines", engine]
                if args.spark_master:
                    cmd += ["--spark-master", args.spark_master]
                tries = [_run_child(cmd) for _ in range(args.repeat)]
                read = [sys.executable, "-m", "bench.bench_checkers", "--read", str(path)]
                reads = [_run_child(read)["fresh_full_read_s"] for _ in range(args.repeat)]
                row = {**_median_row(tries, reads), "generate_s": generated}
                print(json.dumps(row), flush=True)
                rows.append(row)
        finally:
            path.unlink()
    summary: dict[str, object] = {"runs": rows, "load_avg_at_end": os.getloadavg()}
    for engine in args.engines:
        mine = [r for r in rows if r["engine"] == engine]
        if len(mine) > 1:
            small, large = min(mine, key=lambda r: r["ops"]), max(mine, key=lambda r: r["ops"])
            summary[f"{engine}_cost_ratio_largest_to_smallest"] = round(
                large["check_s"] / small["check_s"], 2
            )
            summary[f"{engine}_size_ratio"] = round(large["ops"] / small["ops"], 2)
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}), flush=True)
    (OUT / "results.json").write_text(json.dumps(summary, indent=1) + "\n")


def _run_child(cmd: list[str]) -> dict[str, Any]:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _median_row(tries: list[dict[str, Any]], fresh_reads: list[float]) -> dict[str, Any]:
    """One row for several children: the median check and the median of every read, each
    try's numbers kept beside them. On a shared VM a single check or read varies by up to 2x
    (other processes; the host reclaiming idle pages), so no single child speaks alone."""
    check_s = statistics.median(t["check_s"] for t in tries)
    full = statistics.median(x for t in tries for x in t["full_reads_s"])
    narrow = statistics.median(x for t in tries for x in t["narrow_reads_s"])
    row = dict(tries[len(tries) // 2])
    row.update(
        check_s=round(check_s, 3),
        checks_s=[t["check_s"] for t in tries],
        ops_per_s=round(row["ops"] / check_s),
        full_read_s=round(full, 3),
        narrow_read_s=round(narrow, 3),
        full_reads_s=[x for t in tries for x in t["full_reads_s"]],
        narrow_reads_s=[x for t in tries for x in t["narrow_reads_s"]],
        ratio=round(check_s / full, 2),
        ratio_to_narrow_read=round(check_s / narrow, 2),
        fresh_full_read_s=statistics.median(fresh_reads),
        fresh_full_reads_s=fresh_reads,
        ratio_to_fresh_read=round(check_s / statistics.median(fresh_reads), 2),
        peak_rss_mib=max(t["peak_rss_mib"] for t in tries),
        statuses=sorted({t["status"] for t in tries}),
    )
    return row


if __name__ == "__main__":
    main()
