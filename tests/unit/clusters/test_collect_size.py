"""What a run directory keeps of a node's metadata log directory: everything but the indexes
Kafka preallocates (10 MB each) and rebuilds from the segment."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters import collect
from clusters.collect import METADATA_PARTITION, collect_cluster, kept_raw_file
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
    def copy_dir_out(self, path: str, dest: Path) -> None:
        out = dest / Path(path).name
        out.mkdir(parents=True, exist_ok=True)
        if Path(path).name == METADATA_PARTITION:
            for name, content in LOG_DIR.items():
                (out / name).write_bytes(content)


def test_collection_keeps_the_segments_and_snapshots_and_decodes_as_before(tmp_path, monkeypatch):
    seen: list[list[str]] = []

    def decode(dist, partition_dir: Path) -> str:
        seen.append(sorted(p.name for p in partition_dir.iterdir()))
        return "decoded\n"

    monkeypatch.setattr(collect, "decode_metadata_log", decode)
    collect_cluster(cluster_of(WithMetadataLog), tmp_path, say=lambda _: None)  # type: ignore[arg-type]
    # The decoder still sees the whole directory as the node left it.
    assert seen == [sorted(LOG_DIR)] * 3
    for node in ("n1", "n2", "n3"):
        assert (tmp_path / METADATA_DIR / f"{node}.txt").read_text() == "decoded\n"
        raw = tmp_path / METADATA_DIR / f"{node}-raw"
        assert sorted(p.name for p in raw.iterdir()) == KEPT
        assert (raw / f"{SEGMENT}.log").read_bytes() == b"batch"


def test_decoding_names_segments_as_the_run_directory_keeps_them(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(collect, "run_dump_log", lambda dist, args, cwd: calls.append((args, cwd)))
    for name in ("00000000000000000042.log", f"{SEGMENT}.log", f"{SEGMENT}.index"):
        (tmp_path / name).write_bytes(b"")
    collect.decode_metadata_log(None, tmp_path)  # type: ignore[arg-type]
    files = f"{SEGMENT}.log,00000000000000000042.log"
    assert calls == [(["--cluster-metadata-decoder", "--files", files], tmp_path)]
