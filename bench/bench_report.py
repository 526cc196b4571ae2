"""report.html of a big history: seconds and peak RSS of writing it.

    .venv/bin/python -m bench.bench_report                      # 10M op rows
    .venv/bin/python -m bench.bench_report --op-rows 20000000 --repeat 1

The history is bench/synthetic.py's (every op an invocation and its ok completion: op rows are
twice the ops; no faults, no observer), generated once in a child of its own. Each report is
written in a fresh child process (so its peak RSS, ru_maxrss, is its own) for a verdict whose
findings cite CITED ops spread over the whole history, so that the cited rows are read by index
from every part of the file. Timed: `write_report` alone (history read, folded, drawn, written);
the child's imports are done before. Writes bench/out/report.json and prints one row per run.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "out" / "report.json"
CITED = 200  # ops cited by the findings (4 kinds of 50: what the report shows in full)


def _child(path: Path, out_dir: Path) -> dict[str, float]:
    import pyarrow.parquet as pq

    from checkers.core.findings import Finding
    from checkers.core.verdict import Verdict
    from checkers.report.render import write_report

    rows = pq.ParquetFile(path).metadata.num_rows
    step = max(1, rows // 2 // CITED)
    # Completions (odd indices in the synthetic history), 50 per kind.
    cited = [2 * (i * step) + 1 for i in range(CITED)]
    findings = [
        Finding(f"bench-{k}", None, (i,), f"op {i} cited by the bench")
        for k in range(4)
        for i in cited[k * 50 : (k + 1) * 50]
    ]
    verdict = Verdict("invalid", findings, history=str(path), engine="local")
    started = time.monotonic()
    report = write_report(out_dir, path, verdict)
    seconds = time.monotonic() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(peak_kb / 1024),
        "report_kb": round(report.stat().st_size / 1024),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op-rows", type=int, default=10_000_000, help="op rows of the history")
    ap.add_argument("--repeat", type=int, default=3, help="reports written, each in a child")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child: write one report of this file
    args = ap.parse_args()
    if args.one:
        print(json.dumps(_child(Path(args.one), Path(args.one).parent)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        path = Path(tmp) / "history.parquet"
        gen = (
            "import sys; from bench.synthetic import write_synthetic; "
            f"print(write_synthetic(sys.argv[1], {args.op_rows // 2}))"
        )
        ops = int(
            subprocess.run(
                [sys.executable, "-c", gen, str(path)], check=True, capture_output=True, text=True
            ).stdout
        )
        runs = []
        for _ in range(args.repeat):
            cmd = [sys.executable, "-m", "bench.bench_report", "--one", str(path)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.splitlines()[-1]))
            print(json.dumps({"op_rows": 2 * ops, **runs[-1]}), flush=True)
    row = {
        "op_rows": 2 * ops,
        "seconds_median": statistics.median(r["seconds"] for r in runs),
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in runs),
        "runs": runs,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(row, indent=1) + "\n")
    print(json.dumps({k: v for k, v in row.items() if k != "runs"}))


if __name__ == "__main__":
    main()
