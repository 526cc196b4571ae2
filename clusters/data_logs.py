"""Collecting the queue workload's data partition logs from every broker, decoded on the host.

Each batch header says which leader epoch appended it and which producer (id, epoch) wrote it;
each record line gives its offset and payload, so an acknowledged send's offset names the batch
that holds it (checkers/data_log). Only `*.log` segments are copied: the preallocated 10 MB
indexes beside them carry nothing the checks need.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from clusters.capabilities import Files, require
from clusters.cluster import Cluster, ClusterInfo
from clusters.config import DATA_DIR
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist
from history.format import DATA_LOGS_DIR

PLAN_JSON = "plan.json"


def run_dump_log(dist: KafkaDist, args: list[str], cwd: Path) -> str:
    """DumpLogSegments with `args`, run in `cwd` so that its `Dumping` lines name relative paths."""
    result = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-Dlog4j.configuration=file:/dev/null",
            "-Dlog4j2.configurationFile=/dev/null",
            "-cp",
            dist.host_classpath(),
            dist.classes["dump_log"],
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    if result.returncode != 0:
        raise ClusterError(f"DumpLogSegments failed in {cwd}: {result.stderr[-400:]}")
    return result.stdout


def queue_partitions(dest: Path) -> list[str]:
    """`<topic>-<p>` of the run's queue topic, from the plan; none for other workloads."""
    try:
        gen = json.loads((dest / PLAN_JSON).read_text()).get("generator") or {}
    except (OSError, json.JSONDecodeError, AttributeError):
        return []
    if gen.get("workload") != "queue" or not gen.get("topic"):
        return []
    return [f"{gen['topic']}-{p}" for p in range(int(gen.get("keys") or 0))]


def decode_data_logs(dist: KafkaDist, root: Path) -> str:
    """Every segment under `root/<topic>-<p>/`, record by record with payloads, in one JVM."""
    segments = sorted(str(p.relative_to(root)) for p in root.glob("*/*.log"))
    if not segments:
        return ""
    args = ["--deep-iteration", "--print-data-log", "--files", ",".join(segments)]
    return run_dump_log(dist, args, root)


def collect_data_logs(
    cluster: Cluster[Files], info: ClusterInfo, dest: Path, say: Callable[[str], None] = print
) -> None:
    """Writes `data/<broker>.txt` (decoded) and `data/<broker>-raw/<topic>-<p>/*.log`; refuses
    a cluster with a broker that cannot copy files out (no ``Files``) before copying any."""
    partitions = queue_partitions(dest)
    if not partitions:
        return
    handles = cluster.nodes(info)
    brokers = [n for n in handles.values() if n.spec.is_broker]
    require(brokers, (Files,), "collecting data partition logs")
    dist = cluster.dist(info)
    out = dest / DATA_LOGS_DIR
    for node in brokers:
        name = node.name
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for partition in partitions:
                try:
                    node.copy_files_out(f"{DATA_DIR}/{partition}", root, ".log")
                except ClusterError:
                    continue  # the broker holds no replica of this partition
            try:
                decoded = decode_data_logs(dist, root)
            except (ClusterError, OSError, subprocess.TimeoutExpired) as exc:
                say(f"warning: data logs of {name} not decoded: {exc}")
                continue
            out.mkdir(exist_ok=True)
            (out / f"{name}.txt").write_text(decoded)
            shutil.copytree(root, out / f"{name}-raw", dirs_exist_ok=True)
    say(f"collected data partition logs into {out}")
