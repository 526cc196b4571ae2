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
    seen: dict[str, list[str]] = {}

    def decode(dist, flags, groups, root: Path) -> dict[str, str]:
        for owner, (base, segments) in groups.items():
            # The decoder still sees the whole directory as the node left it.
            seen[owner] = sorted(p.name for p in (root / base).iterdir())
            assert segments == [f"{SEGMENT}.log"]
        return {owner: f"decoded {owner}\n" for owner in groups}

    monkeypatch.setattr(collect, "dump_grouped", decode)
    collect_cluster(cluster_of(WithMetadataLog), tmp_path, say=lambda _: None)  # type: ignore[arg-type]
    assert seen == {n: sorted(LOG_DIR) for n in ("n1", "n2", "n3")}
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
