"""Collecting what a cluster leaves behind: node logs, configs, and each node's metadata log
decoded with DumpLogSegments: the voters' (controllers') in ``metadata/``, the Raft observers'
(broker-only nodes) in ``metadata/observers/`` so that no checker counts them toward a majority.

Data directories are copied out of the containers first (this works on killed nodes too) and
decoded on the host with the same Kafka jars, so a dead node's metadata log is still read.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from clusters.capabilities import Collectable, Files, Logs, layout_of, require
from clusters.cluster import Cluster, ClusterInfo
from clusters.data_logs import collect_data_logs, dump_grouped
from clusters.errors import ClusterError
from history import strict_json
from history.collection import DATA_LOGS, METADATA_LOGS, NODE_LOGS, failure, record_failures
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


def collect_cluster(
    cluster: Cluster[Collectable], dest: Path, say: Callable[[str], None] = print
) -> None:
    """Writes ``logs/<node>/``, ``metadata/[observers/]<node>.txt`` (with the node's log
    directory beside it in ``<node>-raw/``, less its rebuildable indexes) and ``cluster.json``.

    Needs ``Files`` and ``Logs`` of every node: a cluster with a node lacking either is refused
    before anything is written, since a run directory missing one node's metadata log would
    let the checkers judge without that node's evidence.

    Each part is collected whatever became of the one before (a decoder that failed on the
    metadata logs still leaves the data logs to collect), and what failed, for which nodes and
    why, goes into ``collection.json`` (history/collection.py), which the checks read: a check
    whose evidence was not collected says so instead of judging without it.
    """
    info = cluster.info()
    handles = cluster.nodes(info)
    require(handles.values(), (Files, Logs), "collecting a cluster")
    dest.mkdir(parents=True, exist_ok=True)
    (dest / CLUSTER_JSON).write_text(
        strict_json.dumps(
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
    failed: list[dict] = []
    for name, node in handles.items():
        try:
            _write_node_log(name, node.logs(), node, dest, say)
        except ClusterError as exc:
            say(f"warning: {name}: no log collected: {exc}")
            failed.append(failure(NODE_LOGS, [name], exc))
    # A part's failure of any kind (a decoder's JVM, a copy, a disk) must not cost the next part.
    if info.topology.kraft:
        try:
            _collect_metadata_logs(cluster, dest, say, failed)
        except Exception as exc:
            say(f"warning: metadata logs not collected: {exc}")
            failed.append(failure(METADATA_LOGS, None, exc))
    try:
        failed += collect_data_logs(cluster, info, dest, say)
    except Exception as exc:
        say(f"warning: data partition logs not collected: {exc}")
        failed.append(failure(DATA_LOGS, None, exc))
    record_failures(dest, failed)
    # ZooKeeper mode has no KRaft controllers, hence no metadata log to decode.
    what = "logs and metadata logs" if (dest / METADATA_DIR).is_dir() else "logs"
    say(f"collected {what} into {dest}")


def keep_node_logs(
    cluster: Cluster[Collectable], info: ClusterInfo, dest: Path, say: Callable[[str], None]
) -> None:
    """What a failed bring-up leaves to read before the half-made cluster is removed: each
    node's output and configuration under ``logs/<node>/``, as collect_cluster writes them.
    Best effort, node by node: a node that never started has nothing, and says so."""
    try:
        handles = cluster.nodes(info)
    except Exception as exc:
        say(f"warning: no node logs kept: {exc}")
        return
    kept = []
    for name, node in handles.items():
        try:
            _write_node_log(name, node.logs(), node, dest, say)
        except Exception as exc:  # best effort: the bring-up's own error is what gets raised
            say(f"warning: {name}: no log kept: {exc}")
            continue
        kept.append(name)
    if kept:
        say(f"kept the logs of {', '.join(kept)} in {dest / LOGS_DIR}")


def _write_node_log(
    name: str, text: str, node: Collectable, dest: Path, say: Callable[[str], None]
) -> None:
    """``logs/<node>/``: the node's output and, beside it, its configuration directory."""
    logs = dest / LOGS_DIR / name
    logs.mkdir(parents=True, exist_ok=True)
    (logs / NODE_LOG).write_text(text)
    try:
        node.copy_dir_out(layout_of(node).conf_dir, logs)
    except ClusterError as exc:
        say(f"warning: {exc}")


def _collect_metadata_logs(
    cluster: Cluster[Collectable], dest: Path, say: Callable[[str], None], failed: list[dict]
) -> None:
    """Every KRaft node's metadata log copied out, then decoded in one JVM (clusters/data_logs.py
    dump_grouped), each node's text as its own decoding would give it; a node whose log could
    not be copied is added to ``failed``."""
    info = cluster.info()
    nodes = [n for n in cluster.nodes(info).values() if not n.spec.is_zookeeper]
    dist = cluster.dist(info)
    with tempfile.TemporaryDirectory() as tmp:
        groups: dict[str, tuple[str, list[str]]] = {}
        for node in nodes:
            (Path(tmp) / node.name / METADATA_PARTITION).mkdir(parents=True)
            try:
                node.copy_files_out(
                    [f"{layout_of(node).data_dir}/{METADATA_PARTITION}"],
                    Path(tmp) / node.name,
                    kept_raw_file,
                )
            except ClusterError as exc:
                say(f"warning: {exc}")
                failed.append(failure(METADATA_LOGS, [node.name], exc))
                continue
            base = f"{node.name}/{METADATA_PARTITION}"
            segments = sorted(p.name for p in (Path(tmp) / base).glob("*.log"))
            groups[node.name] = (base, segments)
        decoded = dump_grouped(dist, ["--cluster-metadata-decoder"], groups, Path(tmp))
        for node in nodes:
            if node.name not in groups:
                continue
            if isinstance(decoded[node.name], ClusterError):
                say(f"warning: {node.name}'s metadata log not decoded: {decoded[node.name]}")
                failed.append(failure(METADATA_LOGS, [node.name], decoded[node.name]))
                continue
            out = dest / METADATA_DIR / ("" if node.spec.is_controller else OBSERVERS_DIR)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{node.name}.txt").write_text(str(decoded[node.name]))
            keep_raw_files(Path(tmp) / groups[node.name][0], out / f"{node.name}-raw")
