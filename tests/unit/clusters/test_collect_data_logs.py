"""Collecting a queue run's data logs from nodes that hand over real segment files (written by
Kafka's own builder): copied into `data/<broker>-raw/`, decoded into the rows the checkers read,
and, for a broker the decoder cannot read, DumpLogSegments text instead."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bench.segments import write_segments
from checkers.families.data_log.parse import read_data_logs
from clusters import data_logs
from clusters.data_logs import collect_data_logs
from clusters.kafka_dist import load_dist
from tests.unit.checkers.datalogs import B, segment_spec
from tests.unit.clusters.test_capabilities import INFO, FakeCluster, FilesAndLogs

needs_jdk = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
CHECKPOINT = "0\n2\nkchaos-queue 0 3\nkchaos-queue 1 1\n"
PARTS = {0: [B(7, 0, values=(1, 2)), B(7, 0, marker="COMMIT")], 1: [B(8, 0, values=(3,))]}


class WithSegments(FilesAndLogs):
    """A broker whose data directory holds `source/<topic>-<p>/*.log`."""

    source: Path
    copied: list[str]  # every broker's copies, in order, shared

    def copy_files_out(
        self, paths: Sequence[str], dest: Path, keep: Callable[[str], bool]
    ) -> list[Path]:
        self.copied.extend(f"{self.spec.name}:{Path(p).name}" for p in paths)
        out = []
        for path in paths:
            here = self.source / Path(path).name
            if not here.is_dir():
                continue
            (dest / here.name).mkdir(parents=True, exist_ok=True)
            for f in here.iterdir():
                if keep(f.name):
                    out.append(Path(shutil.copy(f, dest / here.name / f.name)))
        return out


def _cluster(tmp_path: Path, dist) -> FakeCluster:
    source = tmp_path / "segments"
    write_segments(dist, source, segment_spec(PARTS, topic="kchaos-queue"))
    # The log directory's own files: the high watermarks, beside files nobody collects here.
    (source / "data").mkdir()
    (source / "data" / "replication-offset-checkpoint").write_text(CHECKPOINT)
    (source / "data" / "recovery-point-offset-checkpoint").write_text(CHECKPOINT)
    handles = {}
    copied: list[str] = []
    for spec in INFO.topology.nodes:
        node = WithSegments(spec)
        node.source = source
        node.copied = copied
        handles[spec.name] = node
    cluster = FakeCluster(handles)
    cluster.dist = lambda info: dist  # type: ignore[method-assign]
    run = tmp_path / "run"
    run.mkdir()
    plan = {"generator": {"workload": "queue", "topic": "kchaos-queue", "keys": 3}}
    (run / "plan.json").write_text(json.dumps(plan))
    return cluster


def _dist():
    dist = load_dist("4.4.0") or load_dist("3.9.2")
    if dist is None:
        pytest.skip("no Kafka release assembled (make setup assembles one)")
    return dist


@needs_jdk
def test_every_brokers_segments_are_copied_and_decoded(tmp_path):
    said: list[str] = []
    cluster = _cluster(tmp_path, _dist())
    collect_data_logs(cluster, INFO, tmp_path / "run", said.append)  # type: ignore[arg-type]
    data = tmp_path / "run" / "data"
    assert sorted(p.name for p in data.glob("*.decoded.json")) == [
        "n1.decoded.json", "n2.decoded.json", "n3.decoded.json"
    ]  # fmt: skip
    assert not list(data.glob("*.txt"))
    assert (data / "n2-raw" / "kchaos-queue-1" / "00000000000000000000.log").is_file()
    assert (data / "n2-raw" / "replication-offset-checkpoint").read_text() == CHECKPOINT
    assert not list(data.glob("*-raw/recovery-point-offset-checkpoint"))
    # Every checkpoint before any segment: each high watermark is below its log's end as copied.
    copied = next(iter(cluster.nodes(INFO).values())).copied  # type: ignore[attr-defined]
    firsts = [i for i, c in enumerate(copied) if c.endswith(":data")]
    assert len(firsts) == 3 and max(firsts) < min(i for i, c in enumerate(copied) if "queue" in c)
    logs = read_data_logs(data)
    assert [list(log.values) for log in logs.values()] == [[1, 2, 3]] * 3
    assert said == [f"collected data partition logs into {data}"]


@needs_jdk
def test_a_broker_the_decoder_cannot_read_gets_dumplogsegments_text(tmp_path, monkeypatch):
    decode = data_logs.decode_segments

    def fails_for_n2(dist, raws, out, timeout=60):
        failed = decode(dist, raws, out, timeout)
        (out / "n2.decoded.json").unlink()  # as if its thread had thrown
        return [*failed, "n2"]

    monkeypatch.setattr(data_logs, "decode_segments", fails_for_n2)
    collect_data_logs(_cluster(tmp_path, _dist()), INFO, tmp_path / "run", lambda _: None)  # type: ignore[arg-type]
    data = tmp_path / "run" / "data"
    assert sorted(p.name for p in data.glob("*.txt")) == ["n2.txt"]
    logs = read_data_logs(data)
    assert logs["n2"].text_name == "n2.txt" and logs["n1"].text_name is None
    assert list(logs["n2"].values) == list(logs["n1"].values) == [1, 2, 3]
    assert list(logs["n2"].batches["position"]) == list(logs["n1"].batches["position"])


@needs_jdk
def test_without_a_decoder_every_broker_gets_text_and_a_warning(tmp_path, monkeypatch):
    def no_jdk(dist, raws, out, timeout=60):
        raise data_logs.ClusterError("KchaosSegments needs javac (a JDK 17) on the PATH")

    monkeypatch.setattr(data_logs, "decode_segments", no_jdk)
    said: list[str] = []
    collect_data_logs(_cluster(tmp_path, _dist()), INFO, tmp_path / "run", said.append)  # type: ignore[arg-type]
    data = tmp_path / "run" / "data"
    assert sorted(p.name for p in data.glob("*.txt")) == ["n1.txt", "n2.txt", "n3.txt"]
    assert "needs javac" in said[0] and "DumpLogSegments instead" in said[0]
    assert [list(log.values) for log in read_data_logs(data).values()] == [[1, 2, 3]] * 3


@needs_jdk
def test_a_broker_whose_logs_nothing_decodes_is_returned_as_a_failure(tmp_path, monkeypatch):
    def no_jdk(dist, raws, out, timeout=60):
        raise data_logs.ClusterError("KchaosSegments needs javac (a JDK 17) on the PATH")

    dump = data_logs.dump_to_file

    def fails_for_n2(dist, raw, text):
        if raw.name == "n2-raw":
            raise data_logs.ClusterError("DumpLogSegments failed in n2-raw: boom")
        dump(dist, raw, text)

    monkeypatch.setattr(data_logs, "decode_segments", no_jdk)
    monkeypatch.setattr(data_logs, "dump_to_file", fails_for_n2)
    got = collect_data_logs(_cluster(tmp_path, _dist()), INFO, tmp_path / "run", lambda _: None)  # type: ignore[arg-type]
    assert got == [
        {"what": "data-logs", "nodes": ["n2"],
         "why": "ClusterError: DumpLogSegments failed in n2-raw: boom"}
    ]  # fmt: skip


@needs_jdk
def test_metadata_logs_that_fail_to_collect_leave_the_data_logs_and_a_record(tmp_path, monkeypatch):
    from clusters import collect
    from history.collection import read_failures

    def decoder_died(*args, **kwargs):
        raise RuntimeError("the decoder's JVM died")

    monkeypatch.setattr(collect, "_collect_metadata_logs", decoder_died)
    cluster = _cluster(tmp_path, _dist())
    said: list[str] = []
    collect.collect_cluster(cluster, tmp_path / "run", said.append)  # type: ignore[arg-type]
    run = tmp_path / "run"
    assert sorted(p.name for p in (run / "data").glob("*.decoded.json")) == [
        "n1.decoded.json", "n2.decoded.json", "n3.decoded.json"
    ]  # fmt: skip
    assert read_failures(run) == [
        {"what": "metadata-logs", "nodes": None, "why": "RuntimeError: the decoder's JVM died"}
    ]
    assert "warning: metadata logs not collected: the decoder's JVM died" in said
