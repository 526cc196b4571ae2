"""The observer's achieved cadence: per-node sampling interval (median, p95) on a real cluster.

The issue asks every Kafka node's JMX to be sampled at least every 250 ms. This runs the run's
own ``Observer`` for a while against a cluster, with a recorder that keeps operations in memory,
and reports the time between successive sample starts (invocations) of each node, and how long
one sample takes. It measures; it asserts nothing (timings on a loaded machine are not a test).

    .venv/bin/python bench/bench_observer.py --name adm1 [--seconds 20]    # an existing cluster
    .venv/bin/python bench/bench_observer.py --up --name adm1 --subnet 10.213.80.0/24

``--up`` brings a 3-node kraft-combined cluster up (``fast`` timing) and tears it down after.
``--pause NODE`` SIGSTOPs that node for the middle third, to see that the others keep cadence.
Writes ``bench/out/observer.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from clusters.cluster import UpOptions
from clusters.docker_lifecycle import DockerCluster
from clusters.engine import client
from clusters.topology import build_topology
from workloads.observe import Observer

OUT = Path(__file__).parent / "out"


class MemoryRecorder:
    """The Recorder's interface, keeping operations in a list (no history file)."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic_ns()

    def record(self, type_, f, value, process, node=None, error=None) -> dict[str, Any]:
        with self._lock:
            op = {"type": type_, "f": f, "process": process, "node": node, "error": error}
            op["time"] = time.monotonic_ns() - self._t0
            self.ops.append(op)
            return op

    def invoke(self, f, value, process, node=None):
        return self.record("invoke", f, value, process, node)

    def ok(self, f, value, process, node=None):
        return self.record("ok", f, value, process, node)


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def cadence(ops: list[dict[str, Any]], since_ns: int = 0, until_ns: int | None = None) -> dict:
    """Per node: intervals between successive invocations and sample durations, in ms."""
    starts: dict[str, list[int]] = defaultdict(list)
    took: dict[str, list[float]] = defaultdict(list)
    types: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    open_at: dict[tuple[Any, str], int] = {}
    for op in ops:
        if op["time"] < since_ns or (until_ns is not None and op["time"] > until_ns):
            continue
        key = (op["process"], op["node"])
        if op["type"] == "invoke":
            starts[op["node"]].append(op["time"])
            open_at[key] = op["time"]
        elif key in open_at:
            took[op["node"]].append((op["time"] - open_at.pop(key)) / 1e6)
            types[op["node"]][op["type"]] += 1
    out = {}
    for node in sorted(starts):
        gaps = [(b - a) / 1e6 for a, b in zip(starts[node], starts[node][1:], strict=False)]
        if not gaps:
            continue
        out[node] = {
            "samples": len(starts[node]),
            "interval_median_ms": round(statistics.median(gaps), 1),
            "interval_p95_ms": round(_quantile(gaps, 0.95), 1),
            "interval_max_ms": round(max(gaps), 1),
            "sample_median_ms": round(statistics.median(took[node]), 1) if took[node] else None,
            "sample_p95_ms": round(_quantile(took[node], 0.95), 1) if took[node] else None,
            "outcomes": dict(types[node]),
        }
    return out


def measure(dc: DockerCluster, seconds: float, pause: str | None) -> dict[str, Any]:
    info = dc.info()
    rec = MemoryRecorder()
    observer = Observer(info.topology, rec)
    nodes = dc.nodes(info)
    observer.start()
    third = seconds / 3
    phases: dict[str, tuple[int, int]] = {}
    try:
        if pause is None:
            time.sleep(seconds)
            phases["all"] = (0, rec.ops[-1]["time"] if rec.ops else 0)
        else:
            time.sleep(third)
            t1 = time.monotonic_ns() - rec._t0
            nodes[pause].pause()
            time.sleep(third)
            t2 = time.monotonic_ns() - rec._t0
            nodes[pause].resume()
            time.sleep(third)
            phases = {"before": (0, t1), f"{pause} paused": (t1, t2), "after": (t2, 10**18)}
    finally:
        if pause is not None:
            nodes[pause].resume()
        observer.stop()
    return {phase: cadence(rec.ops, a, b) for phase, (a, b) in phases.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", default="adm1", help="Docker cluster name")
    p.add_argument("--subnet", default="10.213.80.0/24", help="with --up")
    p.add_argument("--up", action="store_true", help="bring the cluster up, tear it down after")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--pause", default=None, help="SIGSTOP this node for the middle third")
    args = p.parse_args()
    dc = DockerCluster(client(), args.name)
    if args.up:
        dc.remove()
        topo = build_topology("kraft-combined", cluster=args.name, subnet=args.subnet)
        dc.up(topo, UpOptions("3.9", timing="fast"), say=lambda m: None)
    try:
        result = measure(dc, args.seconds, args.pause)
    finally:
        if args.up:
            dc.down(say=lambda m: None)
    OUT.mkdir(exist_ok=True)
    (OUT / "observer.json").write_text(json.dumps(result, indent=2) + "\n")
    for phase, per_node in result.items():
        print(phase)
        for node, s in per_node.items():
            print(
                f"  {node}: {s['samples']} samples, interval median {s['interval_median_ms']} ms,"
                f" p95 {s['interval_p95_ms']} ms, max {s['interval_max_ms']} ms; one sample"
                f" median {s['sample_median_ms']} ms, p95 {s['sample_p95_ms']} ms;"
                f" {s['outcomes']}"
            )


if __name__ == "__main__":
    main()
