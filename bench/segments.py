"""Real Kafka segment files for the data-log tests and bench, written by Kafka's own
MemoryRecords builder (bench/java/KchaosSegmentWriter.java, compiled once per release)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clusters.java_tool import compiled_tool, tool_classpath
from clusters.kafka_dist import KafkaDist

WRITER = Path(__file__).with_name("java") / "KchaosSegmentWriter.java"


def _run(dist: KafkaDist, args: list[str], spec: str | None = None) -> None:
    jar = compiled_tool(dist, WRITER)
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", tool_classpath(dist, jar), WRITER.stem, *args],
        input=spec,
        text=True,
        capture_output=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{WRITER.stem} {args[0]} failed: {done.stderr[-2000:]}")


def write_segments(dist: KafkaDist, root: Path, spec: str) -> None:
    """Segments under `root` from spec lines (the writer's header says their shape)."""
    _run(dist, ["spec", str(root)], spec)


def synth_segments(
    dist: KafkaDist, root: Path, topic: str, partitions: int, per_partition: int, per_batch: int
) -> None:
    """`root/<topic>-<p>/00000000000000000000.log` for each partition: record i at offset i
    holds p * 1_000_000_000 + i, in batches of `per_batch` (producerId 1000 + p, epoch 0)."""
    args = ["synth", str(root), topic, str(partitions), str(per_partition), str(per_batch)]
    _run(dist, args)


def synth_value(partition: int, offset: int) -> int:
    return partition * 1_000_000_000 + offset
