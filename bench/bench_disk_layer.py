"""What the disk layer costs (clusters/disk_layer.py, docs/disk.md).

(a) kchaos's own queue run, as a user runs it (its own process: pipelined sends, unlimited
    rate, fast timing, Kafka 4.4 kraft-combined unless --version), on a fresh cluster of the
    same shape each time, with plain data directories and with ``--disk-layer journal``;
    ``--pairs`` pairs, alternating which goes first. Ok sends/s of each (from the history: the
    span from the first send to the last), their ratio (the median of the pairs'), and, for
    the layered runs, what the layers saw (writes, bytes, fsyncs, what was pending at the end,
    summed over the nodes). Goal (issue 29): the layer keeps >= 50% of the plain throughput.
(b) a micro-bench in one node container: dd into the layer's mount and into a plain directory
    of the same container (the backing directory itself, on the container's own filesystem):
    sequential 4 KiB and 64 KiB writes without fsync (200 MB each), 4 KiB writes each made
    durable (O_DSYNC, 8 MB), and a 200 MB read of a file the backing filesystem has cached.

Writes ``bench/out/disk_layer-<shape>.json``.

    .venv/bin/python -m bench.bench_disk_layer [--seconds 20] [--pairs 1] [--version 4.4]
        [--shape default|throughput] [--skip-runs] [--skip-micro]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker.errors

from bench.bench_throughput import count_history, run_json
from clusters.disk_layer import ask, ensure_layer, mount_script
from clusters.docker_lifecycle import DockerCluster
from clusters.engine import client
from clusters.image import ensure_image
from clusters.layout import IMAGE_LAYOUT
from clusters.topology import NodeSpec

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
CLUSTER, SUBNET = "kt-fuse-bench", "10.213.204.0/24"
CONTAINER = "kchaos-disk-bench"
# The run's shape: kchaos's queue run as a new run gets it, or bench_throughput's (pipelined
# sends at an unlimited rate from 2 producers with 2,000 in flight each: the most a run writes).
SHAPES = {
    "default": [],
    "throughput": ["--send-mode", "async", "--rate", "0", "--concurrency", "2",
                   "--in-flight", "2000", "--linger-ms", "5", "--keys", "8"],
}  # fmt: skip


def kchaos_run(args: argparse.Namespace, results: Path, layer: bool) -> dict[str, Any]:
    """One `kchaos run` in its own process on a fresh cluster, kept for the layers' status."""
    cmd = [
        sys.executable, "-m", "harness.cli", "run", "--workload", "queue",
        "--time-limit", f"{args.seconds:g}", "--version", args.version, "--timing", "fast",
        "--cluster", CLUSTER, "--subnet", SUBNET, "--results-dir", str(results),
        "--name", "layer" if layer else "plain", "--seed", "1", "--keep-cluster",
    ]  # fmt: skip
    cmd += SHAPES[args.shape]
    if layer:
        cmd += ["--disk-layer", "journal"]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    run_dir = (results / "latest").resolve()
    dc = DockerCluster(client(), CLUSTER)
    try:
        if not (run_dir / "history.jsonl").is_file():
            why = f"{done.stdout}\n{done.stderr}"
            raise SystemExit(f"kchaos run failed ({done.returncode}):\n{why}")
        out: dict[str, Any] = {
            "disk_layer": layer,
            **count_history(run_dir / "history.jsonl"),
            **run_json(run_dir),
            "wall_s": round(wall, 1),
        }
        if layer:
            out["layers"] = layer_totals(dc)
        return out
    finally:
        dc.remove()


def layer_totals(dc: DockerCluster) -> dict[str, int]:
    keys = ("writes", "bytes_written", "fsyncs", "fsyncdirs", "pending_files", "pending_bytes",
            "pending_written", "undo_bytes")  # fmt: skip
    totals = dict.fromkeys(keys, 0)
    for node in dc.nodes().values():
        status = ask(node, "status")
        for k in keys:
            totals[k] += int(status[k])
    return totals


# dd's last line: "104857600 bytes (105 MB, 100 MiB) copied, 0.512 s, 205 MB/s".
DD = re.compile(r"^(\d+) bytes .* copied, ([\d.]+) s", re.M)


def micro(image: str, layer_dir: Path) -> dict[str, Any]:
    """dd in one node container, into the layer's mount and into a plain directory."""
    spec = NodeSpec(name="n1", roles=frozenset({"broker"}), node_id=1, ip="10.0.0.1")
    mount = mount_script(spec).strip().splitlines()[-1]
    cases = {
        "write_4k_MBps": "dd if=/dev/zero of={d}/w4 bs=4k count=50000",
        "write_64k_MBps": "dd if=/dev/zero of={d}/w64 bs=64k count=3200",
        "write_4k_dsync_MBps": "dd if=/dev/zero of={d}/ws bs=4k count=2000 oflag=dsync",
        "read_64k_MBps": "dd if={d}/r64 of=/dev/null bs=64k",
    }
    # The read's file is written into the backing directory beside the mount, not through it:
    # the kernel caches what went through the mount (keep_cache), and a read of that would
    # never reach the layer. Both reads find it in the backing filesystem's cache.
    backing = f"{IMAGE_LAYOUT.disk_state_dir}/root"
    script = [mount, f"dd if=/dev/zero of={backing}/r64 bs=64k count=3200 2>/dev/null"]
    for where, d in (("layer", "/var/lib/kafka"), ("plain", backing)):
        for name, cmd in cases.items():
            script.append(f"echo '== {where} {name}'; {cmd.format(d=d)} 2>&1 | tail -1")
    c = client()
    with contextlib.suppress(docker.errors.NotFound):
        c.containers.get(CONTAINER).remove(force=True)
    out = c.containers.run(
        image,
        ["/bin/sh", "-c", " && ".join(script[:2]) + "; " + "; ".join(script[2:])],
        name=CONTAINER,
        remove=True,
        network_mode="none",
        labels={"kchaos": "1"},
        devices=["/dev/fuse:/dev/fuse:rwm"],
        cap_add=["SYS_ADMIN"],
        volumes={str(layer_dir): {"bind": IMAGE_LAYOUT.disk_dir, "mode": "ro"}},
    ).decode()
    results: dict[str, dict[str, float]] = {"layer": {}, "plain": {}}
    for block in out.split("== ")[1:]:
        head, _, rest = block.partition("\n")
        where, name = head.split()
        m = DD.search(rest)
        if m is None:
            raise SystemExit(f"dd said nothing readable for {where} {name}:\n{rest}")
        results[where][name] = round(int(m.group(1)) / float(m.group(2)) / 1e6, 1)
    results["ratio"] = {
        k: round(results["layer"][k] / results["plain"][k], 2) for k in results["plain"]
    }
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--pairs", type=int, default=1)
    p.add_argument("--version", default="4.4")
    p.add_argument("--shape", choices=sorted(SHAPES), default="default")
    p.add_argument("--skip-runs", action="store_true")
    p.add_argument("--skip-micro", action="store_true")
    args = p.parse_args()
    layer_dir = ensure_layer(say=lambda m: print(f"· {m}"))
    record: dict[str, Any] = {
        "seconds": args.seconds,
        "version": args.version,
        "shape": args.shape,
        "pairs": [],
    }
    if not args.skip_micro:
        record["micro"] = micro(ensure_image(client(), say=print), layer_dir)
        for name, ratio in record["micro"]["ratio"].items():
            print(
                f"micro {name:22} layer {record['micro']['layer'][name]:>8} "
                f"plain {record['micro']['plain'][name]:>8}  ratio {ratio}"
            )
    if not args.skip_runs:
        with tempfile.TemporaryDirectory(prefix="bench-disk-") as tmp:
            for i in range(args.pairs):
                order = (False, True) if i % 2 == 0 else (True, False)
                pair = {}
                for layer in order:
                    r = kchaos_run(args, Path(tmp) / f"pair{i}", layer)
                    pair["layer" if layer else "plain"] = r
                    print(
                        f"run {'layer' if layer else 'plain':5}: {r['ok_per_s']:>9,.1f} ok "
                        f"sends/s ({r['ok_sends']:,} in {r['span_s']} s; check {r['check']})"
                    )
                pair["ratio"] = round(pair["layer"]["ok_per_s"] / pair["plain"]["ok_per_s"], 3)
                record["pairs"].append(pair)
        ratios = [pair["ratio"] for pair in record["pairs"]]
        record["ratio"] = statistics.median(ratios)
        record["goal_met"] = record["ratio"] >= 0.5
        print(f"layer/plain ok sends/s: {record['ratio']} (goal >= 0.5: {record['goal_met']})")
    OUT.mkdir(exist_ok=True)
    (OUT / f"disk_layer-{args.shape}.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
