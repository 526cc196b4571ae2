"""Collecting what a cluster leaves behind: node logs, configs, and each node's metadata log
decoded with DumpLogSegments: the voters' (controllers') in ``metadata/``, the Raft observers'
(broker-only nodes) in ``metadata/observers/`` so that no checker counts them toward a majority.

Data directories are copied out of the containers first (this works on killed nodes too) and
decoded on the host with the same Kafka jars, so a dead node's metadata log is still read.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from clusters.capabilities import Collectable, Files, Logs, require
from clusters.cluster import Cluster
from clusters.config import CONF_DIR, DATA_DIR
from clusters.data_logs import collect_data_logs, run_dump_log
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist
from history.format import CLUSTER_JSON, LOGS_DIR, METADATA_DIR, NODE_LOG, OBSERVERS_DIR

METADATA_PARTITION = "__cluster_metadata-0"
# Kafka preallocates the active segment's offset and time indexes (10 MB each by default, zero
# filled) and rebuilds both from the `.log` when it loads a segment without them; DumpLogSegments
# reads the `.log` alone. Kept, they were 90% of a run directory.
REBUILDABLE_SUFFIXES = frozenset({".index", ".timeindex"})


def kept_raw_file(name: str) -> bool:
    """Whether a file of a copied log directory stays in the run directory: everything but the
    rebuildable indexes (also when Kafka renamed them `.deleted`, `.cleaned` or `.swap`), so the
    segments, KRaft snapshots (`.checkpoint`), producer snapshots, `quorum-state` and
    `leader-epoch-checkpoint` remain for a person or a later decoder."""
    return not REBUILDABLE_SUFFIXES.intersection(Path(name).suffixes)


def keep_raw_files(src: Path, dest: Path) -> None:
    """Copies the files of log directory `src` that ``kept_raw_file`` keeps into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.iterdir()):
        if path.is_file() and kept_raw_file(path.name):
            shutil.copy2(path, dest / path.name)


def decode_metadata_log(dist: KafkaDist, partition_dir: Path) -> str:
    """The metadata log segments of one node, decoded record by record; its `Dumping` lines name
    the segments by file name, as kept in the run directory's `<node>-raw/` (not the temporary
    directory they were decoded in)."""
    segments = sorted(partition_dir.glob("*.log"))
    if not segments:
        return ""
    files = ",".join(s.name for s in segments)
    return run_dump_log(dist, ["--cluster-metadata-decoder", "--files", files], partition_dir)


def collect_cluster(
    cluster: Cluster[Collectable], dest: Path, say: Callable[[str], None] = print
) -> None:
    """Writes ``logs/<node>/``, ``metadata/[observers/]<node>.txt`` (with the node's log
    directory beside it in ``<node>-raw/``, less its rebuildable indexes) and ``cluster.json``.

    Needs ``Files`` and ``Logs`` of every node: a cluster with a node lacking either is refused
    before anything is written, since a run directory missing one node's metadata log would
    let the checkers judge without that node's evidence.
    """
    info = cluster.info()
    handles = cluster.nodes(info)
    require(handles.values(), (Files, Logs), "collecting a cluster")
    dist = cluster.dist(info)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / CLUSTER_JSON).write_text(
        json.dumps(
            {
                "cluster": info.topology.cluster,
                "topology": info.topology.kind,
                "version": info.version,
                "timing": info.timing,
                "cluster_id": info.cluster_id,
                "nodes": [
                    {"name": n.name, "roles": sorted(n.roles), "node_id": n.node_id, "ip": n.ip}
                    for n in info.topology.nodes
                ],
            },
            indent=2,
        )
    )
    for name, node in handles.items():
        logs = dest / LOGS_DIR / name
        logs.mkdir(parents=True, exist_ok=True)
        (logs / NODE_LOG).write_text(node.logs())
        try:
            node.copy_dir_out(CONF_DIR, logs)
        except ClusterError as exc:
            say(f"warning: {exc}")
        if not info.topology.kraft or node.spec.is_zookeeper:
            continue
        out = dest / METADATA_DIR / ("" if node.spec.is_controller else OBSERVERS_DIR)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                node.copy_dir_out(f"{DATA_DIR}/{METADATA_PARTITION}", Path(tmp))
            except ClusterError as exc:
                say(f"warning: {exc}")
                continue
            decoded = decode_metadata_log(dist, Path(tmp) / METADATA_PARTITION)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.txt").write_text(decoded)
            keep_raw_files(Path(tmp) / METADATA_PARTITION, out / f"{name}-raw")
    collect_data_logs(cluster, info, dest, say)
    # ZooKeeper mode has no KRaft controllers, hence no metadata log to decode.
    what = "logs and metadata logs" if (dest / METADATA_DIR).is_dir() else "logs"
    say(f"collected {what} into {dest}")
