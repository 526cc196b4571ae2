"""From a run's last send to its verdict and report: seconds and peak memory of each phase.

Each cluster cell is one whole `kchaos run` as a user starts it, in its own process tree, on a
fresh 3-node kraft-combined cluster (one at a time: two clusters starve 2 cores):

- ``librdkafka``: the defaults, nothing but the cluster's name, subnet, seed and time limit;
- ``java``: ``--client java --send-mode async --rate 0`` (Kafka's Java client at full speed,
  its sends recorded in its JVM);

and ``synthetic`` is the checker bench (bench/bench_checkers.py, 10 M ops, local engine) as a
guard that the checkers did not get slower while the pipeline around them changed.

Per cell: the phases run.json records (harness/run/phases.py: bring-up, setup, workload, heal,
ready after heal, final reads, ending, history, collect and tear down, check and report), each
with its seconds and the peak RSS of the biggest kchaos process while it ran (the bench samples
the run's process tree, the run and its JVM clients, every 0.25 s; the cluster's JVMs run in
containers and are not counted), the check's own seconds (results.json's stats: the report is
the rest of "check and report"), ok sends and ok sends/s. Goals (issue 28): the verdict and
report within 120 s of the workload's end, every kchaos process under 4 GB; with the defaults
at least 5,000 ok sends/s; with the Java client at least 100,000. Prints a table, writes
``bench/out/verdict.json`` and exits 1 if a goal is missed.

    .venv/bin/python bench/bench_verdict.py [--cells librdkafka,java,synthetic] [--seconds 30]
        [--version 4.4] [--name kbv --subnet 10.213.195.0/24] [--keep-runs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).parent / "out"
GOAL_AFTER_WORKLOAD_S = 120.0
GOAL_RSS_MB = 4096
GOAL_OK_PER_S = {"librdkafka": 5_000, "java": 100_000}
# The checker bench's met number at 10 M ops (docs/checkers.md): 1.9 M ops/s on a quiet box.
# A guard, not a target: on a shared VM single checks vary up to 2x, so below half is a regression.
SYNTHETIC_MET_OPS_PER_S = 1_900_000
SYNTHETIC_GUARD = 0.5
CELL_ARGS = {
    "librdkafka": [],
    "java": ["--client", "java", "--send-mode", "async", "--rate", "0"],
}
PAGE_KB = os.sysconf("SC_PAGESIZE") // 1024


@dataclass
class Sampler:
    """Samples the RSS of every process under ``root`` (by parent pid, from /proc)."""

    root: int
    every_s: float = 0.25
    samples: list[tuple[float, int, str]] = field(default_factory=list)  # wall, rss kB, name
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            now = time.time()
            for rss_kb, name in _tree(self.root).values():
                self.samples.append((now, rss_kb, name))

    def peak_mb(self, start: float, end: float) -> tuple[float, str]:
        inside = [(rss, name) for t, rss, name in self.samples if start <= t <= end]
        if not inside:
            return 0.0, ""
        rss, name = max(inside)
        return round(rss / 1024, 1), name


def _tree(root: int) -> dict[int, tuple[int, str]]:
    """Every live process under ``root`` (itself included): pid -> (RSS in kB, command name)."""
    parent: dict[int, int] = {}
    info: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: split after its last ")".
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parent[pid] = int(rest[1])
        info[pid] = (int(rest[21]) * PAGE_KB, name)
    keep = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in keep and pid not in keep:
                keep.add(pid)
                changed = True
    return {pid: info[pid] for pid in keep if pid in info}


def cluster_cell(cell: str, args: argparse.Namespace, results: Path) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "harness.cli", "run",
        "--name", args.name, "--cluster", args.name, "--subnet", args.subnet,
        "--version", args.version, "--time-limit", str(args.seconds), "--seed", str(args.seed),
        "--results-dir", str(results), *CELL_ARGS[cell],
    ]  # fmt: skip
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sampler = Sampler(proc.pid)
    sampler.start()
    out, _ = proc.communicate()
    sampler.stop()
    ended = time.time()
    run_dir = _newest_run(results)
    if run_dir is None:
        return {"cell": cell, "error": out.decode(errors="replace")[-2000:]}
    run = json.loads((run_dir / "run.json").read_text())
    verdict = _json_or_empty(run_dir / "results.json")
    phases = []
    marks = run.get("phases", [])
    for i, p in enumerate(marks):
        start = p["started_wall"]
        end = marks[i + 1]["started_wall"] if i + 1 < len(marks) else ended
        peak, name = sampler.peak_mb(start, end)
        phases.append({**p, "peak_rss_mb": peak, "peak_process": name})
    after = _after_workload(phases)
    ok_sends = _ok_sends(run_dir)
    workload_s = next((p["seconds"] for p in phases if p["phase"] == "workload"), None)
    peak_all, peak_name = sampler.peak_mb(started, ended)
    row = {
        "cell": cell,
        "command": " ".join(cmd[2:]),
        "run_dir": str(run_dir),
        "exit_code": proc.returncode,
        "status": verdict.get("status", run.get("check", {}).get("status")),
        "check_s": (verdict.get("stats") or {}).get("seconds"),
        "phases": phases,
        "after_workload_s": after,
        "ok_sends": ok_sends,
        "ok_sends_per_s": round(ok_sends / args.seconds, 1) if ok_sends is not None else None,
        "workload_phase_s": workload_s,
        "peak_rss_mb": peak_all,
        "peak_process": peak_name,
    }
    row["goals"] = {
        "after_workload_s": after is not None and after <= GOAL_AFTER_WORKLOAD_S,
        "rss": peak_all <= GOAL_RSS_MB,
        "ok_sends_per_s": (row["ok_sends_per_s"] or 0) >= GOAL_OK_PER_S[cell],
    }
    return row


def _after_workload(phases: list[dict[str, Any]]) -> float | None:
    """Seconds from the workload's end to the end of the check and report."""
    names = [p["phase"] for p in phases]
    if "workload" not in names or names[-1] != "check and report":
        return None
    return round(sum(p["seconds"] for p in phases[names.index("workload") + 1 :]), 1)


def _ok_sends(run_dir: Path) -> int | None:
    """ok send completions in the history (Parquet: counted without reading values)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = run_dir / "history.parquet"
    if not path.exists():
        return None
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(columns=["row", "type", "f", "process"]):
        row, typ, f = (batch.column(c).cast("string") for c in ("row", "type", "f"))
        mask = pc.and_(pc.equal(row, "op"), pc.and_(pc.equal(typ, "ok"), pc.equal(f, "send")))
        n += pc.sum(mask.cast("int64")).as_py() or 0
    # The final reads' polls are not sends; nothing else but client sends has f == "send".
    return n


def _json_or_empty(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _newest_run(results: Path) -> Path | None:
    runs = [p.parent for p in results.glob("*/*/run.json")]
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def synthetic_cell(ops: int) -> dict[str, Any]:
    """bench_checkers at ``ops``, local engine, one repeat: its ops/s against the met number."""
    subprocess.run(
        [sys.executable, "-m", "bench.bench_checkers", "--ops", str(ops), "--repeat", "1"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    row = json.loads((OUT / "results.json").read_text())["runs"][0]
    per_s = row["ops_per_s"]
    return {
        "cell": "synthetic",
        "ops": row["ops"],
        "ops_per_s": per_s,
        "peak_rss_mb": row.get("peak_rss_mib"),
        "goals": {"no regression": per_s >= SYNTHETIC_GUARD * SYNTHETIC_MET_OPS_PER_S},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="librdkafka,java,synthetic")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--version", default="4.4")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--name", default="kbv")
    ap.add_argument("--subnet", default="10.213.195.0/24")
    ap.add_argument("--synthetic-ops", type=int, default=10_000_000)
    ap.add_argument("--keep-runs", type=Path, help="keep the run directories here")
    args = ap.parse_args()
    cells = [c for c in args.cells.split(",") if c]
    unknown = [c for c in cells if c not in (*CELL_ARGS, "synthetic")]
    if unknown:
        ap.error(f"unknown cell(s) {', '.join(unknown)}: cells are librdkafka, java, synthetic")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-verdict-") as tmp:
        results = args.keep_runs or Path(tmp)
        for cell in cells:
            if cell == "synthetic":
                rows.append(synthetic_cell(args.synthetic_ops))
            else:
                rows.append(cluster_cell(cell, args, results / cell))
    OUT.mkdir(exist_ok=True)
    (OUT / "verdict.json").write_text(json.dumps({"rows": rows}, indent=2, allow_nan=False))
    _print(rows)
    return 0 if all(all(r.get("goals", {"ran": False}).values()) for r in rows) else 1


def _print(rows: list[dict[str, Any]]) -> None:
    console = Console()
    for r in rows:
        if "phases" in r:
            title = f"{r['cell']}: {r['status']}, {r['ok_sends']} ok sends "
            title += f"({r['ok_sends_per_s']}/s); {r['after_workload_s']} s after the workload"
            t = Table(title=title)
            t.add_column("phase")
            t.add_column("seconds", justify="right")
            t.add_column("peak RSS MB", justify="right")
            t.add_column("by")
            for p in r["phases"]:
                t.add_row(
                    p["phase"], f"{p['seconds']:.1f}", f"{p['peak_rss_mb']:.0f}", p["peak_process"]
                )
            console.print(t)
        console.print({k: v for k, v in r.items() if k not in ("phases",)})


if __name__ == "__main__":
    sys.exit(main())
