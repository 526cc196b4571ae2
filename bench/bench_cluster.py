"""How long until a cluster is usable: cold setup, and warm ``cluster up`` until ready.

Ready means what ``clusters.readiness`` means: one leader agreed by every controller, every
broker registered and unfenced (ZooKeeper mode: a live controller broker, all brokers
registered). Prints medians and writes ``bench/out/cluster.json``.

    .venv/bin/python bench/bench_cluster.py [--runs 3] [--cold] [--topology kraft-combined ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusters.cluster import UpOptions
from clusters.docker_lifecycle import DockerCluster
from clusters.engine import client
from clusters.topology import TOPOLOGIES, build_topology

OUT = Path(__file__).parent / "out"


def cold_setup() -> float:
    """Setup with an empty kchaos cache, an empty Maven repository and no node image.

    The image is built under a repository name of its own, so clusters in use keep theirs.
    """
    repo = "kchaos-node-coldbench"
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as m2:
        env = {
            **os.environ,
            "KCHAOS_CACHE": cache,
            "KCHAOS_MAVEN_LOCAL_REPO": m2,
            "KCHAOS_IMAGE_REPO": repo,
        }
        started = time.monotonic()
        try:
            subprocess.run([sys.executable, "-m", "harness.cli", "setup"], env=env, check=True)
            return time.monotonic() - started
        finally:
            tag = subprocess.run(
                [sys.executable, "-c", "from clusters.image import image_tag; print(image_tag())"],
                env=env,
                capture_output=True,
                text=True,
            )
            subprocess.run(["docker", "rmi", "-f", tag.stdout.strip()], capture_output=True)


def warm_up(kind: str, timing: str) -> float:
    dc = DockerCluster(client(), f"bench-{kind}")
    dc.remove()
    topo = build_topology(kind, cluster=dc.cluster, subnet="10.213.40.0/24")
    started = time.monotonic()
    try:
        dc.up(topo, UpOptions("3.9", timing=timing), say=lambda m: None)
        return time.monotonic() - started
    finally:
        dc.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="also time a cold setup")
    parser.add_argument("--timing", default="default", choices=["default", "fast"])
    parser.add_argument("--topology", action="append", choices=TOPOLOGIES)
    args = parser.parse_args()
    results: dict[str, object] = {"runs": args.runs, "timing": args.timing, "cpus": os.cpu_count()}
    if args.cold:
        print("timing a cold setup (empty caches, image built afresh)...")
        results["cold_setup_s"] = round(cold_setup(), 1)
        print(f"cold setup: {results['cold_setup_s']} s")
    warm: dict[str, dict[str, object]] = {}
    for kind in (args.topology or list(TOPOLOGIES)) if args.runs > 0 else []:
        times = [warm_up(kind, args.timing) for _ in range(args.runs)]
        warm[kind] = {
            "median_s": round(statistics.median(times), 2),
            "all_s": [round(t, 2) for t in times],
        }
        print(
            f"warm up until ready, {kind} ({args.timing} timing): median "
            f"{warm[kind]['median_s']} s over {args.runs} runs {warm[kind]['all_s']}"
        )
    results["warm_up_until_ready"] = warm
    OUT.mkdir(exist_ok=True)
    (OUT / "cluster.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
