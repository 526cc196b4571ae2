"""How `kchaos analyze` scales with the number of runs, on local[*] and on a Spark cluster.

    .venv/bin/python -m bench.bench_analyze --runs 20 100 400 --ops 20000
    .venv/bin/python -m bench.bench_analyze --runs 20 100 400 --ops 20000 --standalone
    .venv/bin/python -m bench.bench_analyze --runs 100 --spark-master spark://HOST:7077

Generates N run directories once each (bench/out/analyze/<N>x<ops>/queue/<stamp>-<seed>/:
spec.json, run.json, results.json and a synthetic valid history.parquet of about `--ops`
operations, bench/synthetic.py; every seventh run says invalid, so the page has something to
rank), then times `kchaos analyze DIR` as a user runs it, in a process of its own, `--repeat`
times: the whole command's wall time, and the part after Spark started (what analyze itself
prints). `--standalone` starts a standalone master and worker on 127.0.0.1 first
(checkers/scan/spark_cluster.py) and passes its URL; `--spark-master` names any other. Writes
bench/out/analyze.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.synthetic import write_synthetic

OUT = Path(__file__).parent / "out"
REPO = Path(__file__).resolve().parents[1]
NEMESES = ("partition", "kill", "pause", "clock")
VERSIONS = ("3.9.2", "4.0.1", "4.1.0")


def make_runs(root: Path, n: int, ops: int) -> Path:
    """N run directories under root/queue (kept: generating is not what is timed)."""
    done = root / ".complete"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    for i in range(n):
        night = 20261101 + i % 28
        run = root / "queue" / f"{night}T0{i % 6}0000-{i}"
        run.mkdir(parents=True)
        write_synthetic(run / "history.parquet", ops)
        spec = {"workload": "queue", "nemesis": [NEMESES[i % len(NEMESES)]],
                "version": VERSIONS[i % len(VERSIONS)][:3], "seed": i}  # fmt: skip
        (run / "spec.json").write_text(json.dumps(spec))
        info = {"seed": i, "started": f"{night}T000000", "kafka_version": VERSIONS[i % 3]}
        (run / "run.json").write_text(json.dumps(info))
        bad = i % 7 == 3
        results = {"status": "invalid" if bad else "valid",
                   "counts": {"lost-write": {"failing": 1}} if bad else {}}  # fmt: skip
        (run / "results.json").write_text(json.dumps(results))
    done.touch()
    return root


def time_analyze(root: Path, master: str | None) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="kchaos-bench-analyze-")) / "analysis.html"
    cmd = [sys.executable, "-m", "harness.cli", "analyze", "--out", str(out), str(root)]
    if master:
        cmd[4:4] = ["--spark-master", master]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - started
    shutil.rmtree(out.parent, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    spark = re.search(r"Spark started \(([\d.]+) s", proc.stderr)
    histories = re.search(r"reading \d+ histories with Spark \(([\d.]+) s", proc.stderr)
    trends = re.search(r"computing trends \(([\d.]+) s", proc.stderr)
    total = re.search(r"\(([\d.]+) s\)\s*$", proc.stdout)
    assert spark and histories and trends and total, proc.stdout + proc.stderr
    return {
        "wall_s": round(wall, 2),
        "spark_start_s": float(spark[1]),
        "after_start_s": round(float(total[1]) - float(spark[1]), 2),
        # The one Spark job over every history (op counts per run).
        "spark_job_s": round(float(trends[1]) - float(histories[1]), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[20, 100])
    ap.add_argument("--ops", type=int, default=20_000, help="operations per run's history")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark-master", default=None)
    ap.add_argument(
        "--standalone", action="store_true", help="start a master and worker on 127.0.0.1, use it"
    )
    args = ap.parse_args()
    cluster = None
    master = args.spark_master
    if args.standalone:
        from checkers.scan.spark_cluster import start_standalone

        cluster = start_standalone(tempfile.mkdtemp(prefix="kchaos-bench-standalone-"))
        master = cluster.url
    rows: list[dict[str, Any]] = []
    try:
        for n in args.runs:
            root = make_runs(OUT / "analyze" / f"{n}x{args.ops}", n, args.ops)
            samples = [time_analyze(root, master) for _ in range(args.repeat)]
            row: dict[str, Any] = {
                "runs": n,
                "ops_per_run": args.ops,
                "master": master or "local[*]",
            }
            for key in samples[0]:
                row[key] = round(statistics.median(s[key] for s in samples), 2)
            row["samples"] = samples
            rows.append(row)
            print(f"{n} runs x {args.ops} ops on {row['master']}: wall {row['wall_s']} s, "
                  f"Spark start {row['spark_start_s']} s, after start {row['after_start_s']} s, "
                  f"the Spark job {row['spark_job_s']} s (medians of {args.repeat})",
                  flush=True)  # fmt: skip
    finally:
        if cluster is not None:
            cluster.stop()
    OUT.mkdir(exist_ok=True)
    name = "analyze-standalone.json" if args.standalone else "analyze.json"
    (OUT / name).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
