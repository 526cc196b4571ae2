"""Collecting the queue workload's data partition logs from every broker, decoded on the host.

Each batch header says which leader epoch appended it and which producer (id, epoch) wrote it;
each record gives its offset and payload, so an acknowledged send's offset names the batch that
holds it (checkers/families/data_log). Only `*.log` segments are copied: the preallocated 10 MB
indexes beside them carry nothing the checks need. They are decoded by KchaosSegments
(clusters/java/KchaosSegments.java, Kafka's own record classes) into fixed-width rows the
checkers read as arrays; a run of millions of records took minutes and gigabytes as text.
Also here: DumpLogSegments over many nodes' segments in one JVM (`dump_grouped`), which the
metadata logs' collection uses.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusters.capabilities import Files, layout_of, require
from clusters.cluster import Cluster, ClusterInfo
from clusters.errors import ClusterError
from clusters.java_tool import compiled_tool, tool_classpath
from clusters.kafka_dist import ClassArchive, KafkaDist, quiet_logging
from history.collection import DATA_LOGS, failure
from history.format import DATA_LOGS_DIR, HW_CHECKPOINT

PLAN_JSON = "plan.json"
# How DumpLogSegments starts the text of each file it decodes.
DUMPING = "Dumping "
SEGMENTS_SOURCE = Path(__file__).with_name("java") / "KchaosSegments.java"
SEGMENTS_MAIN = "KchaosSegments"
# checkers/families/data_log/segments.py reads what it writes; a broker's JSON, written last.
DECODED_SUFFIX = ".decoded.json"
# A batch at a time per thread: 18.6M records of 3 brokers decoded in 160 MB (bench_data_logs).
DECODER_HEAP = "-Xmx256m"
DECODE_TIMEOUT_S = 600


def _dump_log_command(dist: KafkaDist, archive: ClassArchive, args: list[str]) -> list[str]:
    return [
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
    ]


def run_dump_log(dist: KafkaDist, args: list[str], cwd: Path) -> str:
    """DumpLogSegments with `args`, run in `cwd` so that its `Dumping` lines name relative paths."""
    archive = ClassArchive.of(dist, dist.classes["dump_log"])
    result = archive.run(
        _dump_log_command(dist, archive, args),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    if result.returncode != 0:
        raise ClusterError(f"DumpLogSegments failed in {cwd}: {result.stderr[-400:]}")
    return result.stdout


def dump_grouped(
    dist: KafkaDist, flags: list[str], groups: dict[str, tuple[str, list[str]]], root: Path
) -> dict[str, str | ClusterError]:
    """DumpLogSegments over many nodes' segments in one JVM (each JVM start costs about half a
    CPU-second; a run decoded up to nine). ``groups``: owner -> (its directory under ``root``,
    its segments relative to that directory). Each owner's text is what one JVM of its own run
    in its directory prints: the same `Dumping` lines, naming its segments the same way. If the
    one JVM fails (a segment it cannot read), each owner is decoded alone, so one bad node
    costs only its own text: its entry is then the ClusterError that says why."""
    files = [f"{base}/{seg}" for base, segs in groups.values() for seg in segs]
    if not files:
        return {owner: "" for owner in groups}
    try:
        text = run_dump_log(dist, [*flags, "--files", ",".join(files)], root)
    except (ClusterError, subprocess.TimeoutExpired):
        return {
            owner: _dump_alone(dist, flags, root / base, segs)
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


def _dump_alone(
    dist: KafkaDist, flags: list[str], base: Path, segs: list[str]
) -> str | ClusterError:
    if not segs:
        return ""
    try:
        return run_dump_log(dist, [*flags, "--files", ",".join(segs)], base)
    except subprocess.TimeoutExpired as exc:
        return ClusterError(f"DumpLogSegments in {base} timed out after {exc.timeout:.0f} s")
    except ClusterError as exc:
        return exc


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


def decode_segments(
    dist: KafkaDist, raws: dict[str, Path], out: Path, timeout: float = DECODE_TIMEOUT_S
) -> list[str]:
    """KchaosSegments over each broker's copied segments (`raws`: broker -> its
    `<topic>-<p>/*.log` directory), in one JVM, a thread per broker on at most every core:
    writes `<broker>.decoded.json`, `.batches.bin` and `.records.bin` into `out`. Returns the
    brokers it could not decode (their JSON is missing); raises JavaToolError when the decoder
    cannot be built, subprocess.TimeoutExpired when it overran."""
    jar = compiled_tool(dist, SEGMENTS_SOURCE)
    archive = ClassArchive.of(dist, jar.stem)
    for name in raws:
        (out / f"{name}{DECODED_SUFFIX}").unlink(missing_ok=True)
    done = archive.run(
        [
            "java",
            DECODER_HEAP,
            "-XX:+UseSerialGC",
            *archive.options,
            *quiet_logging(),
            "-cp",
            tool_classpath(dist, jar),
            SEGMENTS_MAIN,
            str(out),
            *(f"{name}={raw}" for name, raw in raws.items()),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    failed = [n for n in raws if not (out / f"{n}{DECODED_SUFFIX}").is_file()]
    if done.returncode != 0 and not failed:
        failed = list(raws)  # it says it failed: trust no file of this run
    return failed


def dump_to_file(dist: KafkaDist, raw: Path, text: Path) -> None:
    """DumpLogSegments text of one broker's segments into `text`, streamed (never held):
    the path for a broker the decoder could not read, and for a host without a JDK."""
    segments = sorted(str(p.relative_to(raw)) for p in raw.glob("*/*.log"))
    with text.open("w") as f:
        if not segments:
            return
        archive = ClassArchive.of(dist, dist.classes["dump_log"])
        flags = ["--deep-iteration", "--print-data-log", "--files", ",".join(segments)]
        done = archive.run(
            _dump_log_command(dist, archive, flags),
            stdout=f,
            stderr=subprocess.PIPE,
            text=True,
            timeout=DECODE_TIMEOUT_S,
            cwd=raw,
        )
    if done.returncode != 0:
        raise ClusterError(f"DumpLogSegments failed in {raw}: {done.stderr[-400:]}")


def _copy_checkpoint(node: Files, raw: Path) -> None:
    """The broker's replication-offset-checkpoint (each partition's high watermark as it last
    wrote it) into `raw`, when it has one: the per-replica checks read what Kafka claimed
    committed (checkers/families/durability/)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            got = node.copy_files_out(
                [layout_of(node).data_dir], Path(tmp), lambda name: name == HW_CHECKPOINT
            )
        except ClusterError:
            return
        for path in got[:1]:
            shutil.move(path, raw / HW_CHECKPOINT)


def collect_data_logs(
    cluster: Cluster[Files], info: ClusterInfo, dest: Path, say: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Copies each broker's high-watermark checkpoint into `data/<broker>-raw/`, then its
    queue-topic segments into `data/<broker>-raw/<topic>-<p>/`, and decodes them
    (decode_segments); a broker the decoder could not read gets `data/<broker>.txt` from
    DumpLogSegments instead. Refuses a cluster with a broker that
    cannot copy files out (no ``Files``) before copying any. Returns what failed
    (history/collection.py entries): the brokers whose logs were not decoded, and why."""
    partitions = queue_partitions(dest)
    if not partitions:
        return []
    handles = cluster.nodes(info)
    brokers = [n for n in handles.values() if n.spec.is_broker]
    require(brokers, (Files,), "collecting data partition logs")
    dist = cluster.dist(info)
    out = dest / DATA_LOGS_DIR
    out.mkdir(exist_ok=True)
    raws: dict[str, Path] = {}
    for node in brokers:
        raws[node.name] = out / f"{node.name}-raw"
        raws[node.name].mkdir(exist_ok=True)
        # Before any segment: a high watermark checkpointed earlier than a log was copied is
        # below that log's end, as it was when written (the run's sends are over by now).
        _copy_checkpoint(node, raws[node.name])
    for node in brokers:
        raw = raws[node.name]
        data_dir = layout_of(node).data_dir
        wanted = [f"{data_dir}/{partition}" for partition in partitions]
        # A directory the broker lacks is a partition it holds no replica of; none, none.
        with contextlib.suppress(ClusterError):
            node.copy_files_out(wanted, raw, _is_segment)
    try:
        failed = decode_segments(dist, raws, out)
    except (ClusterError, OSError, subprocess.TimeoutExpired) as exc:
        say(f"warning: data logs not decoded by KchaosSegments ({exc}): DumpLogSegments instead")
        failed = list(raws)
    lost = []
    for name in failed:
        try:
            dump_to_file(dist, raws[name], out / f"{name}.txt")
        except (ClusterError, OSError, subprocess.TimeoutExpired) as exc:
            (out / f"{name}.txt").unlink(missing_ok=True)
            say(f"warning: {name}'s data logs not decoded: {exc}")
            lost.append(failure(DATA_LOGS, [name], exc))
    say(f"collected data partition logs into {out}")
    return lost
