"""Recorded sends per second: kchaos's pipelined queue beside Kafka's own perf producer.

On one kraft-combined cluster (3 nodes, Kafka 3.9 unless --version):

(b) ``kchaos run --workload queue --send-mode async --rate 0 --time-limit 30`` as a user runs
    it (its own process, every operation recorded, the run checked), keeping the cluster;
(a) then Kafka's ``org.apache.kafka.tools.ProducerPerformance`` from the cached jars, on the host
    (it is a client: it talks only to the cluster's addresses), acks=all and
    enable.idempotence=true, into a topic shaped as kchaos's (same partitions, replication 3,
    min.insync.replicas 2), records of kchaos's size (its values are 10 decimal digits), for the
    same number of seconds.

Prints the ok sends per second of each and their ratio, and writes ``bench/out/throughput.json``.
Goal: kchaos >= 50% of the perf tool and >= 5,000 recorded ok sends/s. The perf tool runs
second, on a cluster kchaos has warmed up; both run on the same 2 cores as the brokers.

    .venv/bin/python bench/bench_throughput.py [--seconds 30] [--concurrency 2] [--in-flight 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from clusters.docker_cluster import DockerCluster
from clusters.engine import client
from clusters.topology import build_topology

OUT = Path(__file__).parent / "out"
ROOT = Path(__file__).resolve().parent.parent
CLUSTER, SUBNET = "kasync", "10.213.161.0/24"
KAFKA_CACHE = Path.home() / ".cache" / "kchaos" / "kafka"
PERF_TOPIC = "kchaos-perf"
# kchaos's values: producer q's n-th value is q * 10^9 + n, 10 digits; its keys 1 digit.
RECORD_SIZE = 10
WINDOW = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec")


def kchaos_run(args: argparse.Namespace, results: Path) -> dict[str, float]:
    """One `kchaos run` in its own process, cluster kept; what its history recorded."""
    cmd = [
        sys.executable, "-m", "harness.cli", "run",
        "--workload", "queue", "--send-mode", "async", "--rate", "0",
        "--time-limit", str(args.seconds), "--concurrency", str(args.concurrency),
        "--in-flight", str(args.in_flight), "--linger-ms", str(args.linger_ms),
        "--keys", str(args.keys), "--version", args.version, "--timing", "fast",
        "--cluster", args.name, "--subnet", args.subnet, "--results-dir", str(results),
        "--name", "throughput", "--seed", "1", "--keep-cluster",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    run_dir = (results / "latest").resolve()
    if not (run_dir / "history.jsonl").is_file():
        raise SystemExit(f"kchaos run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return {**count_history(run_dir / "history.jsonl"), **_run_json(run_dir), "wall_s": wall}


def count_history(path: Path) -> dict[str, float]:
    """Client sends by outcome, and the span from the first send's invocation to the last
    send's completion (the workload's own seconds, without setup or final reads)."""
    counts = {"ok": 0, "fail": 0, "info": 0, "invoke": 0}
    first = last = None
    with path.open() as f:
        next(f)
        for line in f:
            op = json.loads(line)
            if op["f"] != "send" or not isinstance(op["process"], int):
                continue
            counts[op["type"]] += 1
            first = op["time"] if first is None else first
            last = op["time"]
    span = ((last or 0) - (first or 0)) / 1e9
    out: dict[str, float] = {f"{k}_sends": v for k, v in counts.items()}
    out["span_s"] = round(span, 3)
    out["ok_per_s"] = round(counts["ok"] / span, 1) if span else 0.0
    out["recorded_ops_per_s"] = round((counts["invoke"] * 2) / span, 1) if span else 0.0
    return out


def _run_json(run_dir: Path) -> dict[str, object]:
    run = json.loads((run_dir / "run.json").read_text())
    final = run.get("final_reads") or {}
    return {
        "kafka_version": run.get("kafka_version"),
        "check": (run.get("check") or {}).get("status"),
        "final_reads_complete": final.get("complete"),
        "run_dir": str(run_dir),
    }


def perf_tool(args: argparse.Namespace, bootstrap: str, version: str) -> dict[str, float]:
    """ProducerPerformance for `args.seconds`: records/s over its complete 5-second windows."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(PERF_TOPIC, args.keys, 3, config={"min.insync.replicas": "2"})
    for fut in admin.create_topics([topic], operation_timeout=30).values():
        fut.result(timeout=60)
    libs = KAFKA_CACHE / version / "libs"
    cmd = [
        "java", "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance",
        "--topic", PERF_TOPIC, "--num-records", "1000000000", "--record-size", str(RECORD_SIZE),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
        "enable.idempotence=true", f"linger.ms={args.linger_ms:g}",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    windows: list[tuple[int, float]] = []
    deadline = time.monotonic() + args.seconds + 1
    try:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), True)
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = WINDOW.match(line)
            if m:
                windows.append((int(m.group(1)), float(m.group(2))))
    finally:
        proc.terminate()
        proc.wait(10)
    if not windows:
        raise SystemExit("ProducerPerformance printed no window")
    records = sum(n for n, _ in windows)
    seconds = sum(n / rate for n, rate in windows if rate)
    return {
        "records": records,
        "seconds": round(seconds, 2),
        "ok_per_s": round(records / seconds, 1),
        "windows_per_s": [rate for _, rate in windows],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--concurrency", type=int, default=2, help="kchaos producers")
    ap.add_argument("--in-flight", type=int, default=2000, help="sends in flight per producer")
    ap.add_argument("--linger-ms", type=float, default=5.0, help="both producers' linger.ms")
    ap.add_argument("--keys", type=int, default=8, help="partitions of both topics")
    ap.add_argument("--version", default="3.9")
    ap.add_argument("--name", default=CLUSTER, help="Docker cluster name")
    ap.add_argument("--subnet", default=SUBNET)
    args = ap.parse_args()
    dc = DockerCluster(client(), args.name)
    dc.remove()
    try:
        with tempfile.TemporaryDirectory() as d:
            kchaos = kchaos_run(args, Path(d))
            topo = build_topology("kraft-combined", cluster=args.name, subnet=args.subnet)
            perf = perf_tool(args, topo.bootstrap_servers(), str(kchaos["kafka_version"]))
    finally:
        dc.remove()
    ratio = kchaos["ok_per_s"] / perf["ok_per_s"] if perf["ok_per_s"] else 0.0
    result = {
        "command": " ".join(sys.argv),
        "seconds": args.seconds,
        "concurrency": args.concurrency,
        "in_flight": args.in_flight,
        "linger_ms": args.linger_ms,
        "record_size": RECORD_SIZE,
        "partitions": args.keys,
        "cpus": os.cpu_count(),
        "kchaos": kchaos,
        "perf_tool": perf,
        "ratio": round(ratio, 3),
        "goal_met": ratio >= 0.5 and kchaos["ok_per_s"] >= 5000,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"kchaos (recorded, ok sends/s): {kchaos['ok_per_s']:,.0f}  check: {kchaos['check']}")
    print(f"ProducerPerformance (records/s): {perf['ok_per_s']:,.0f}")
    print(f"ratio: {ratio:.2f}  goal met: {result['goal_met']}")


if __name__ == "__main__":
    main()
