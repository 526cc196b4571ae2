"""What a run directory keeps of a node's metadata log directory: everything but the indexes
Kafka preallocates (10 MB each) and rebuilds from the segment."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from clusters import collect
from clusters.collect import METADATA_PARTITION, collect_cluster, kept_raw_file
from clusters.docker_node import DockerNode
from clusters.topology import build_topology
from history.format import METADATA_DIR
from tests.unit.clusters.test_capabilities import FilesAndLogs, cluster_of

SEGMENT = "00000000000000000000"
# A KRaft node's __cluster_metadata-0 after a run: one active segment with its preallocated
# indexes, an older rolled one, a KRaft snapshot, a producer snapshot and the quorum files.
LOG_DIR = {
    f"{SEGMENT}.log": b"batch",
    f"{SEGMENT}.index": b"\0" * 4096,
    f"{SEGMENT}.timeindex": b"\0" * 4096,
    f"{SEGMENT}.snapshot": b"producers",
    "00000000000000000042.log.deleted": b"old batch",
    "00000000000000000042.index.deleted": b"\0" * 16,
    "00000000000000000042.timeindex.deleted": b"\0" * 16,
    "00000000000000000100-0000000003.checkpoint": b"kraft snapshot",
    "leader-epoch-checkpoint": b"0\n1\n3 0\n",
    "partition.metadata": b"version: 0\n",
    "quorum-state": b'{"leaderId":1}',
}
KEPT = sorted(n for n in LOG_DIR if ".index" not in n and ".timeindex" not in n)


@pytest.mark.parametrize("name", sorted(LOG_DIR))
def test_only_the_rebuildable_indexes_are_left_behind(name):
    assert kept_raw_file(name) == (name in KEPT)


class WithMetadataLog(FilesAndLogs):
    def copy_files_out(
        self, paths: Sequence[str], dest: Path, keep: Callable[[str], bool]
    ) -> list[Path]:
        (path,) = paths
        out = dest / Path(path).name
        out.mkdir(parents=True, exist_ok=True)
        if Path(path).name != METADATA_PARTITION:
            return []
        for name, content in LOG_DIR.items():
            if keep(name):
                (out / name).write_bytes(content)
        return sorted(out.iterdir())


def test_collection_keeps_the_segments_and_snapshots_and_decodes_as_before(tmp_path, monkeypatch):
    seen: dict[str, list[str]] = {}

    def decode(dist, flags, groups, root: Path) -> dict[str, str]:
        for owner, (base, segments) in groups.items():
            # The decoder sees what the run directory keeps: the segments without the indexes
            # (DumpLogSegments reads a `.log` alone), which are never copied out of the node.
            seen[owner] = sorted(p.name for p in (root / base).iterdir())
            assert segments == [f"{SEGMENT}.log"]
        return {owner: f"decoded {owner}\n" for owner in groups}

    monkeypatch.setattr(collect, "dump_grouped", decode)
    collect_cluster(cluster_of(WithMetadataLog), tmp_path, say=lambda _: None)  # type: ignore[arg-type]
    assert seen == {n: KEPT for n in ("n1", "n2", "n3")}
    for node in ("n1", "n2", "n3"):
        assert (tmp_path / METADATA_DIR / f"{node}.txt").read_text() == f"decoded {node}\n"
        raw = tmp_path / METADATA_DIR / f"{node}-raw"
        assert sorted(p.name for p in raw.iterdir()) == KEPT
        assert (raw / f"{SEGMENT}.log").read_bytes() == b"batch"


def test_one_jvm_decodes_every_node_and_each_text_is_as_its_own_decoding_gives(
    tmp_path, monkeypatch
):
    from clusters import data_logs
    from clusters.errors import ClusterError

    calls = []
    combined = (
        "Dumping n1/__cluster_metadata-0/00000000000000000000.log\n"
        "Log starting offset: 0\nbaseOffset: 0 lastOffset: 1\n"
        "Dumping n10/__cluster_metadata-0/00000000000000000000.log\n"
        "Log starting offset: 0\nbaseOffset: 0 lastOffset: 7\n"
    )

    def dump(dist, args, cwd):
        calls.append((args, cwd))
        return combined

    monkeypatch.setattr(data_logs, "run_dump_log", dump)
    seg = "00000000000000000000.log"
    groups = {
        "n1": ("n1/__cluster_metadata-0", [seg]),
        "n10": ("n10/__cluster_metadata-0", [seg]),
    }
    texts = data_logs.dump_grouped(None, ["--cluster-metadata-decoder"], groups, tmp_path)  # type: ignore[arg-type]
    files = f"n1/__cluster_metadata-0/{seg},n10/__cluster_metadata-0/{seg}"
    assert calls == [(["--cluster-metadata-decoder", "--files", files], tmp_path)]
    assert texts["n1"] == f"Dumping {seg}\nLog starting offset: 0\nbaseOffset: 0 lastOffset: 1\n"
    assert texts["n10"].startswith(f"Dumping {seg}\n") and "lastOffset: 7" in texts["n10"]

    # One JVM failing (a segment it cannot read) falls back to one per node, in its directory.
    calls.clear()

    def fails_together(dist, args, cwd):
        calls.append((args, cwd))
        if len(calls) == 1:
            raise ClusterError("DumpLogSegments failed")
        return f"Dumping {seg}\n"

    monkeypatch.setattr(data_logs, "run_dump_log", fails_together)
    texts = data_logs.dump_grouped(None, ["--cluster-metadata-decoder"], groups, tmp_path)  # type: ignore[arg-type]
    assert [cwd for _, cwd in calls[1:]] == [
        tmp_path / groups["n1"][0],
        tmp_path / groups["n10"][0],
    ]
    assert texts == {"n1": f"Dumping {seg}\n", "n10": f"Dumping {seg}\n"}


class _ArchiveOnly:
    """A stopped container, which answers only Docker's archive call, in chunks of odd sizes
    (Docker's stream does not align them with tar's blocks)."""

    status = "exited"
    labels: ClassVar[dict[str, str]] = {}  # a node on plain directories (no disk layer)

    def __init__(self, files: dict[str, bytes], chunk: int) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, content in files.items():
                info = tarfile.TarInfo(f"{METADATA_PARTITION}/{name}")
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
        data = buf.getvalue()
        self.chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]

    def get_archive(self, path: str, chunk_size: int | None = None):
        return iter(self.chunks), {}


@pytest.mark.parametrize("chunk", [1, 511, 4096, 1 << 20])
def test_a_docker_node_streams_out_only_the_kept_files_whole(tmp_path, monkeypatch, chunk):
    files = dict(LOG_DIR)
    files[f"{SEGMENT}.index"] = bytes(range(256)) * 64  # content, so a misplaced byte shows
    files[f"{SEGMENT}.log"] = bytes(reversed(range(256))) * 300
    node = DockerNode(None, "kchaos-fake-n1", build_topology("kraft-combined").nodes[0])  # type: ignore[arg-type]
    monkeypatch.setattr(node, "_container", lambda: _ArchiveOnly(files, chunk))
    copied = node.copy_files_out([f"/data/{METADATA_PARTITION}"], tmp_path, kept_raw_file)
    assert sorted(p.name for p in copied) == sorted(n for n in files if n in KEPT)
    for path in copied:
        assert path.read_bytes() == files[path.name]
    assert not (tmp_path / METADATA_PARTITION / f"{SEGMENT}.index").exists()


class _Running:
    """A running container: the listing through exec_run, the tar through the exec API's
    stream of (stdout, stderr) frames of odd sizes, stderr frames between them."""

    status = "running"
    id = "fake"
    labels: ClassVar[dict[str, str]] = {}  # a node on plain directories (no disk layer)

    def __init__(self, files: dict[str, bytes], chunk: int, code: int = 0) -> None:
        self.files = files
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, content in files.items():
                info = tarfile.TarInfo(f"data/{METADATA_PARTITION}/{name}")
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
        data = buf.getvalue()
        self.frames = []
        for i in range(0, len(data), chunk):
            self.frames += [(data[i : i + chunk], None), (None, b"tar: a warning\n")]
        self.code = code
        self.api = self

    def exec_run(self, cmd, demux=False):
        listing = f"d /data/{METADATA_PARTITION}\n" + "".join(
            f"f /data/{METADATA_PARTITION}/{n}\n" for n in self.files
        )
        return type("R", (), {"exit_code": 0, "output": (listing.encode(), b"")})()

    def exec_create(self, container, cmd):
        assert cmd[:2] == ["tar", "-cf"] and not any(".index" in c for c in cmd)
        return {"Id": "x"}

    def exec_start(self, exec_id, stream, demux):
        assert stream and demux
        return iter(self.frames)

    def exec_inspect(self, exec_id):
        return {"ExitCode": self.code}


@pytest.mark.parametrize("chunk", [1, 511, 32768])
def test_a_running_docker_node_streams_its_tar_out_frame_by_frame(tmp_path, monkeypatch, chunk):
    files = dict(LOG_DIR)
    files[f"{SEGMENT}.log"] = bytes(reversed(range(256))) * 300
    kept = {n: c for n, c in files.items() if kept_raw_file(n)}
    container = _Running(kept, chunk)
    node = DockerNode(container, "kchaos-fake-n1", build_topology("kraft-combined").nodes[0])  # type: ignore[arg-type]
    monkeypatch.setattr(node, "_container", lambda: container)
    copied = node.copy_files_out([f"/data/{METADATA_PARTITION}"], tmp_path, kept_raw_file)
    assert sorted(p.name for p in copied) == sorted(kept)
    for path in copied:
        assert path.read_bytes() == files[path.name]


def test_a_tar_that_failed_inside_the_node_is_streamed_again_from_the_archive(
    tmp_path, monkeypatch
):
    kept = {n: c for n, c in LOG_DIR.items() if kept_raw_file(n)}
    failing = _Running(kept, 4096, code=2)
    failing.get_archive = _ArchiveOnly(LOG_DIR, 4096).get_archive  # type: ignore[attr-defined]
    node = DockerNode(failing, "kchaos-fake-n1", build_topology("kraft-combined").nodes[0])  # type: ignore[arg-type]
    monkeypatch.setattr(node, "_container", lambda: failing)
    copied = node.copy_files_out([f"/data/{METADATA_PARTITION}"], tmp_path, kept_raw_file)
    assert sorted(p.name for p in copied) == KEPT
