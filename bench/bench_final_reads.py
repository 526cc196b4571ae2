"""Final reads per second, each client: the queue workload's final reads run again on a kept
cluster, as a run does them, timed.

Make a run that keeps its cluster, with enough acknowledged sends to time (millions: the Java
client recording its own sends gets there in 30 s):

    kchaos run --workload queue --client java --send-mode async --rate 0 --time-limit 30 \\
        --name fr --keep-cluster

then, on this machine:

    .venv/bin/python bench/bench_final_reads.py --run results/fr/latest [--cluster fr]
        [--clients librdkafka,java] [--timeout 600] [--out bench/out/final_reads.json]

For each client it reads the run's topic back from the beginning with that client's final reads
(workloads/queue.py final_reads for librdkafka, workloads/java_final.py final_reads_java for
the Java client, its loop in the JVM), looking for every send the run's history says was
acknowledged (`ok`), and records the polls into a scratch history (librdkafka, through the
harness's Recorder) or a scratch side file (the JVM's), as a run would. It prints records/s
(what the reads read over their seconds, the high watermarks' sum when they completed) and the
acknowledged sends per second; the slower client's figure, rounded down, is what
workloads/queue_ops.py FINAL_READ_RATE should say for it. The cluster is only read.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from clusters.topology import build_topology
from harness.run.recorder import Recorder
from history.columnar import read_elements
from history.format import JSONL_NAME, PARQUET_NAME
from history.reader import read_history
from workloads.client_choice import CLIENT_FIELD, CLIENT_VERSION_FIELD, JAVA, LIBRDKAFKA
from workloads.java_host import JavaHost, client_dist
from workloads.queue import QueueWorkload


def acknowledged(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Keys and values of the run's `ok` sends (its Parquet copy, else its JSONL history)."""
    parquet = run_dir / PARQUET_NAME
    if parquet.exists():
        t = read_elements(parquet, ["type", "kind", "key", "value"])
        ok = np.asarray(t["type"].to_numpy(zero_copy_only=False) == "ok")
        send = np.asarray(t["kind"].to_numpy(zero_copy_only=False) == "send")
        keys = t["key"].to_numpy(zero_copy_only=False)[ok & send]
        values = t["value"].to_numpy(zero_copy_only=False)[ok & send]
        return keys.astype(np.int64), values.astype(np.int64)
    keys, values = [], []
    for op in read_history(run_dir / JSONL_NAME).ops:
        if op["type"] == "ok" and op["f"] in ("send", "txn"):
            for mop in op["value"]:
                if mop[0] == "send":
                    keys.append(mop[1])
                    values.append(mop[2][1])
    return np.array(keys, dtype=np.int64), np.array(values, dtype=np.int64)


def read_once(
    run_dir: Path, cluster: str, client: str, keys: np.ndarray, values: np.ndarray, timeout: float
) -> dict[str, Any]:
    """One client's final reads of the run's topic, timed."""
    spec = json.loads((run_dir / "spec.json").read_text())
    plan = json.loads((run_dir / "plan.json").read_text())
    run = json.loads((run_dir / "run.json").read_text())
    gen = dict(plan["generator"])
    gen.pop(CLIENT_FIELD, None)
    if client == JAVA:
        gen[CLIENT_FIELD] = JAVA
        gen[CLIENT_VERSION_FIELD] = str(run.get("kafka_version") or spec["version"])
    topo = build_topology(
        spec["topology"],
        cluster=cluster,
        subnet=spec["subnet"],
        zookeepers=int(spec.get("zookeepers") or 1),
    )
    run_id = f"bench-final/{client}/{time.time_ns()}"
    wl = QueueWorkload(gen, topo, int(plan["seed"]), run_id)
    with tempfile.TemporaryDirectory() as scratch:
        recorder = Recorder(Path(scratch) / JSONL_NAME, run_id, flush_seconds=0.2)
        try:
            if client == JAVA:
                wl.java = JavaHost(client_dist(gen[CLIENT_VERSION_FIELD]))
                wl.side_recorder = recorder
            wl.acked_bulk(keys, values)
            ids = iter(range(10**9))
            began = time.monotonic()
            outcome = wl.final(lambda: next(ids), recorder.record, timeout)
            seconds = time.monotonic() - began
        finally:
            wl.close()
            recorder.close()
    ends = sum(max(0, int(v)) for v in outcome["high_watermarks"].values())
    return {
        "client": client,
        "seconds": round(seconds, 2),
        "acknowledged": outcome["acknowledged"],
        "read_acknowledged": outcome["read_acknowledged"],
        "complete": outcome["complete"],
        "polls": outcome["polls"],
        "records_at_start": ends,
        "records_per_s": round(ends / seconds, 1) if seconds and outcome["complete"] else None,
        "acknowledged_per_s": round(outcome["read_acknowledged"] / seconds, 1) if seconds else 0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="the kept run's directory")
    ap.add_argument("--cluster", default=None, help="its cluster's name (default: the run's)")
    ap.add_argument("--clients", default=f"{LIBRDKAFKA},{JAVA}")
    ap.add_argument("--timeout", type=float, default=600.0, help="each read's budget, seconds")
    ap.add_argument("--out", type=Path, default=Path("bench/out/final_reads.json"))
    args = ap.parse_args()
    run_dir = args.run.resolve()
    if not (run_dir / "spec.json").exists():
        raise SystemExit(f"{args.run}: not a kchaos run directory (no spec.json)")
    clients = args.clients.split(",")
    unknown = sorted(set(clients) - {LIBRDKAFKA, JAVA})
    if unknown:
        raise SystemExit(f"--clients: unknown {', '.join(unknown)} (librdkafka, java)")
    cluster = args.cluster or json.loads((run_dir / "spec.json").read_text())["cluster"]
    keys, values = acknowledged(run_dir)
    print(f"{len(values):,} acknowledged sends in {run_dir}", flush=True)
    rows = []
    for client in clients:
        row = read_once(run_dir, cluster, client, keys, values, args.timeout)
        row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        rows.append(row)
        print(
            f"{client:>10}: {row['records_per_s'] or 0:>12,.0f} records/s "
            f"({row['records_at_start']:,} in {row['seconds']} s; "
            f"{row['read_acknowledged']:,}/{row['acknowledged']:,} acknowledged read, "
            f"{row['polls']:,} polls; harness peak RSS {row['peak_rss_mb']} MB)",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"run": str(run_dir), "cells": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
