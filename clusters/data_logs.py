"""Collecting the queue workload's data partition logs from every broker, decoded on the host.

Each batch header says which leader epoch appended it and which producer (id, epoch) wrote it;
each record line gives its offset and payload, so an acknowledged send's offset names the batch
that holds it (checkers/families/data_log). Only `*.log` segments are copied: the preallocated 10 MB
indexes beside them carry nothing the checks need.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from clusters.capabilities import Files, layout_of, require
from clusters.cluster import Cluster, ClusterInfo
from clusters.errors import ClusterError
from clusters.kafka_dist import ClassArchive, KafkaDist, quiet_logging
from history.format import DATA_LOGS_DIR

PLAN_JSON = "plan.json"
# How DumpLogSegments starts the text of each file it decodes.
DUMPING = "Dumping "


def run_dump_log(dist: KafkaDist, args: list[str], cwd: Path) -> str:
    """DumpLogSegments with `args`, run in `cwd` so that its `Dumping` lines name relative paths."""
    archive = ClassArchive.of(dist, dist.classes["dump_log"])
    try:
        result = subprocess.run(
            [
                "java",
                "-Xmx256m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                *archive.options,
                *quiet_logging(),
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
    except subprocess.TimeoutExpired:
        archive.done(exited=False)
        raise
    archive.done(exited=result.returncode >= 0)
    if result.returncode != 0:
        raise ClusterError(f"DumpLogSegments failed in {cwd}: {result.stderr[-400:]}")
    return result.stdout


def dump_grouped(
    dist: KafkaDist, flags: list[str], groups: dict[str, tuple[str, list[str]]], root: Path
) -> dict[str, str]:
    """DumpLogSegments over many nodes' segments in one JVM (each JVM start costs about half a
    CPU-second; a run decoded up to nine). ``groups``: owner -> (its directory under ``root``,
    its segments relative to that directory). Each owner's text is what one JVM of its own run
    in its directory prints: the same `Dumping` lines, naming its segments the same way. If the
    one JVM fails (a segment it cannot read), each owner is decoded alone, so one bad node
    costs only its own text."""
    files = [f"{base}/{seg}" for base, segs in groups.values() for seg in segs]
    if not files:
        return {owner: "" for owner in groups}
    try:
        text = run_dump_log(dist, [*flags, "--files", ",".join(files)], root)
    except (ClusterError, subprocess.TimeoutExpired):
        return {
            owner: run_dump_log(dist, [*flags, "--files", ",".join(segs)], root / base)
            if segs
            else ""
            for owner, (base, segs) in groups.items()
        }
    prefixes = sorted(((f"{base}/", owner) for owner, (base, _) in groups.items()), reverse=True)
    parts: dict[str, list[str]] = {owner: [] for owner in groups}
    current: str | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith(DUMPING):
            path = line[len(DUMPING) :]
            for prefix, owner in prefixes:
                if path.startswith(prefix):
                    current, line = owner, DUMPING + path[len(prefix) :]
                    break
        if current is not None:
            parts[current].append(line)
    return {owner: "".join(lines) for owner, lines in parts.items()}


def _is_segment(name: str) -> bool:
    return name.endswith(".log")


def queue_partitions(dest: Path) -> list[str]:
    """`<topic>-<p>` of the run's queue topic, from the plan; none for other workloads."""
    try:
        gen = json.loads((dest / PLAN_JSON).read_text()).get("generator") or {}
    except (OSError, json.JSONDecodeError, AttributeError):
        return []
    if gen.get("workload") != "queue" or not gen.get("topic"):
        return []
    return [f"{gen['topic']}-{p}" for p in range(int(gen.get("keys") or 0))]


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
    with tempfile.TemporaryDirectory() as tmp:
        groups: dict[str, tuple[str, list[str]]] = {}
        for node in brokers:
            root = Path(tmp) / node.name
            root.mkdir()
            data_dir = layout_of(node).data_dir
            wanted = [f"{data_dir}/{partition}" for partition in partitions]
            # A directory the broker lacks is a partition it holds no replica of; none, none.
            with contextlib.suppress(ClusterError):
                node.copy_files_out(wanted, root, _is_segment)
            segments = sorted(str(p.relative_to(root)) for p in root.glob("*/*.log"))
            groups[node.name] = (node.name, segments)
        try:
            flags = ["--deep-iteration", "--print-data-log"]
            decoded = dump_grouped(dist, flags, groups, Path(tmp))
        except (ClusterError, OSError, subprocess.TimeoutExpired) as exc:
            say(f"warning: data logs not decoded: {exc}")
            return
        out.mkdir(exist_ok=True)
        for name, text in decoded.items():
            (out / f"{name}.txt").write_text(text)
            shutil.copytree(Path(tmp) / name, out / f"{name}-raw", dirs_exist_ok=True)
    say(f"collected data partition logs into {out}")
