"""Checker throughput on synthetic valid histories: ops/s, peak memory, check/plain-read ratio.

    .venv/bin/python -m bench.bench_checkers --ops 1000000 10000000            # local
    .venv/bin/python -m bench.bench_checkers --ops 1000000 --engine spark

Writes bench/out/results.json. The Spark session is started before timing (its start-up is
reported apart); each size is checked once, after plain pyarrow reads of the same file, and
the ratio of check time to `plain_read_s` is the headline: checking costs that many reads.
`plain_read_s` is `pq.read_table(path, columns=CHECK_COLUMNS)`: every row of the columns the
local check decodes for every row (no filter, no conversion); `full_read_s`, every column, is
for reference (the check reads the op text, wall time, node and error columns only for reset,
observer and nemesis rows, none in these synthetic histories). Each size runs in a fresh child
process so that its peak RSS is its own (ru_maxrss never goes down).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from checkers.api import check
from history.columnar import CHECK_COLUMNS

OUT = Path(__file__).parent / "out"


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--engine", choices=["local", "spark"], default="local")
    ap.add_argument("--spark-master", default=None)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one size
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.one:
        _parent(args)
        return
    spark, startup = None, 0.0
    if args.engine == "spark":
        from checkers.spark_session import spark_session

        t = time.monotonic()
        spark = spark_session(args.spark_master)
        startup = time.monotonic() - t
    results = []
    for n in args.ops:
        path = OUT / f"synthetic-{n}.parquet"
        t = time.monotonic()
        # Generated in a process of its own: its arrays must not count in the check's peak RSS.
        gen = [sys.executable, "-c", f"from bench.synthetic import write_synthetic as w; "
               f"print(w({str(path)!r}, {n}))"]  # fmt: skip
        ops = int(subprocess.run(gen, check=True, capture_output=True, text=True).stdout)
        generate = time.monotonic() - t
        t = time.monotonic()
        pq.read_table(path)
        full = time.monotonic() - t
        t = time.monotonic()
        pq.read_table(path, columns=CHECK_COLUMNS)
        plain = time.monotonic() - t
        t = time.monotonic()
        verdict = check(path, args.spark_master, engine=args.engine, spark=spark, write=False)
        checked = time.monotonic() - t
        row = {
            "ops": ops,
            "engine": args.engine,
            "status": verdict.status,
            "check_s": round(checked, 3),
            "ops_per_s": round(ops / checked),
            "plain_read_s": round(plain, 3),
            "plain_read": f"pq.read_table(columns={len(CHECK_COLUMNS)} check columns)",
            "full_read_s": round(full, 3),
            "ratio_check_to_read": round(checked / plain, 2),
            "driver_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "children_peak_mib": _descendants_peak_kib() // 1024,
            "peak_rss_mib": (
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + _descendants_peak_kib()
            )
            // 1024,
            "spark_startup_s": round(startup, 2),
            "generate_s": round(generate, 2),
            "cpus": os.cpu_count(),
            "load_avg_1m": os.getloadavg()[0],
        }
        print(json.dumps(row), flush=True)
        results.append(row)
        path.unlink()


def _parent(args: argparse.Namespace) -> None:
    """Each size in a child of its own; then the cost of the largest against the smallest."""
    rows = []
    for n in args.ops:
        cmd = [sys.executable, "-m", "bench.bench_checkers", "--one", "--ops", str(n)]
        cmd += ["--engine", args.engine]
        if args.spark_master:
            cmd += ["--spark-master", args.spark_master]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        print(json.dumps(row), flush=True)
        rows.append(row)
    summary: dict[str, object] = {"runs": rows, "load_avg_at_end": os.getloadavg()}
    if len(rows) > 1:
        small, large = min(rows, key=lambda r: r["ops"]), max(rows, key=lambda r: r["ops"])
        summary["cost_ratio_largest_to_smallest"] = round(large["check_s"] / small["check_s"], 2)
        summary["size_ratio"] = round(large["ops"] / small["ops"], 2)
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}), flush=True)
    (OUT / f"results-{args.engine}.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
