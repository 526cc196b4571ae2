"""What libfaketime costs a Kafka node: restart to broker RUNNING, wall time and JVM CPU time.

One node of a fresh kraft-combined cluster is restarted, in turn, without the preload, under
``nemesis.clock.ENV_TEXT``, and under the same text without ``FAKETIME_FORCE_MONOTONIC_FIX=0``
(libfaketime's default on glibc 2.36, which turns every timed wait on a monotonic condition
variable into an immediate timeout: the JVM spins). Variants alternate, so machine load falls on
each alike. CPU seconds (utime + stime of the JVM, PID 1, when it reaches RUNNING) are the
load-robust number; wall seconds are what a run waits. Prints one line per restart and medians,
writes ``bench/out/faketime.json``.

    .venv/bin/python bench/bench_faketime.py [--rounds 2] [--name e2e-ft] [--subnet ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from clusters.cluster import UpOptions
from clusters.config import FAKETIME_ENV
from clusters.docker_lifecycle import DockerCluster
from clusters.docker_node import DockerNode
from clusters.engine import client
from clusters.jmx import JmxUnavailable, sample_kafka
from clusters.readiness import wait_ready
from clusters.topology import build_topology
from nemesis.clock import ENV_TEXT, OFFSET_FILE, offset_text

OUT = Path(__file__).parent / "out"
FIX_LINE = "export FAKETIME_FORCE_MONOTONIC_FIX=0\n"
VARIANTS = {
    "no preload": None,
    "preload (kchaos)": ENV_TEXT,
    "preload (libfaketime default fix)": ENV_TEXT.replace(FIX_LINE, ""),
}
CLOCK_TICKS = 100  # USER_HZ on Linux


def running(node: DockerNode) -> bool:
    try:
        return sample_kafka(node.ip, node.spec.roles).get("broker_state") == "RUNNING"
    except JmxUnavailable:
        return False


def jvm_cpu_s(node: DockerNode) -> float:
    fields = node.exec(["cat", "/proc/1/stat"]).stdout.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def restart_once(node: DockerNode, env_text: str | None, timeout: float) -> dict[str, float]:
    if env_text is None:
        node.exec(["rm", "-f", FAKETIME_ENV])
    else:
        node.put_file(OFFSET_FILE, offset_text(0))
        node.put_file(FAKETIME_ENV, env_text)
    node.stop(timeout=0)
    t0 = time.monotonic()
    node.start()
    while not running(node):
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"{node.name} not RUNNING after {timeout:.0f} s")
        time.sleep(0.25)
    return {"wall_s": round(time.monotonic() - t0, 1), "cpu_s": jvm_cpu_s(node)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--name", default="e2e-ft")
    ap.add_argument("--subnet", default="10.213.70.0/24")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    dc = DockerCluster(client(), args.name)
    dc.remove()
    topo = build_topology("kraft-combined", cluster=args.name, subnet=args.subnet)
    results: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    try:
        info = dc.up(topo, UpOptions("3.9", timing="fast"), say=lambda m: None)
        node = dc.nodes(info)["n3"]
        for r in range(args.rounds):
            for label, env_text in VARIANTS.items():
                wait_ready(dc, info, timeout=args.timeout)
                got = restart_once(node, env_text, args.timeout)
                results[label].append(got)
                print(f"round {r + 1} {label}: {got['wall_s']} s wall, {got['cpu_s']} s CPU")
    finally:
        dc.remove()
    summary = {
        label: {
            "median_wall_s": statistics.median(x["wall_s"] for x in runs),
            "median_cpu_s": statistics.median(x["cpu_s"] for x in runs),
            "runs": runs,
        }
        for label, runs in results.items()
        if runs
    }
    for label, s in summary.items():
        print(f"{label}: median {s['median_wall_s']} s wall, {s['median_cpu_s']} s CPU")
    OUT.mkdir(exist_ok=True)
    (OUT / "faketime.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
