"""The metadata-log checks of one run directory: `metadata/<node>.txt` plus `cluster.json`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkers.core.findings import Finding
from checkers.core.run_files import read_cluster
from checkers.families.data_log.attribution import attribute, partition_leaders
from checkers.families.data_log.log import DataLog
from checkers.families.data_log.sends import Sends
from checkers.families.metadata_log.applied import applied_beyond_commit, unjudged_note
from checkers.families.metadata_log.committed import committed_log, majority_bound, with_watermark
from checkers.families.metadata_log.fencing import deposed_leader_writes
from checkers.families.metadata_log.lease import (
    SESSION_TIMEOUT_MS,
    lease_violations,
    lease_windows,
    sends_within,
)
from checkers.families.metadata_log.liveness import LivenessInput, lease_liveness
from checkers.families.metadata_log.observers import observer_divergence
from checkers.families.metadata_log.parse import MetadataLog, MetadataLogError, read_metadata_logs
from checkers.families.metadata_log.rules import (
    broker_epochs,
    committed_records,
    divergence,
    feature_levels,
    leader_epochs,
)
from checkers.families.migration import logged_migration_regressions, logged_migration_skips
from checkers.families.observer_samples import MetadataInput
from checkers.scan.op_stream import OpRows, int_column, select, where_in
from history.columnar import op_row_groups
from history.format import CLUSTER_JSON, METADATA_DIR, OBSERVERS_DIR


@dataclass
class MetadataLogResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: bool = False
    stats: dict[str, int] = field(default_factory=dict)


def sends_with_walls(op_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ok send/txn completions, each with its invocation's wall clock as `invoke_wall`."""
    wall = {r["index"]: r.get("wall") for r in op_rows if r["type"] == "invoke"}
    return [
        {**r, "invoke_wall": wall.get(r.get("invoke_index"))}
        for r in op_rows
        if r["type"] == "ok" and r["f"] in ("send", "txn")
    ]


# The columns of a send the lease rules and the data-log attribution read (besides
# `invoke_wall`).
SEND_COLUMNS = ("index", "invoke_index", "type", "f", "process", "node", "wall", "value",
                "value_json")  # fmt: skip
# What the lease rules alone read of a send: the data-log attribution reads the sends' element
# rows as arrays (data_log/sends.py), so a run's sends are never read whole for them.
LEASE_COLUMNS = ["index", "invoke_index", "type", "f", "process", "node", "wall"]


class SendRows:
    """A columnar history's ok send/txn completions, each with its invocation's wall clock as
    `invoke_wall` (as `send_ops`), read only when the lease rules ask for those inside some
    fence's window (lease.sends_within): a run without a fence reads none, and one with fences
    reads the op rows once, a row group at a time, keeping only what falls inside. Every
    column of every send, the values' JSON among them, took 1.1 GB at 4M sends."""

    def __init__(
        self, parquet: str | Path, any_ok: bool = True, columns: list[str] = LEASE_COLUMNS
    ) -> None:
        self.parquet = parquet
        self.any_ok = any_ok  # whether the history has an ok send or txn at all
        self.columns = columns

    def __bool__(self) -> bool:
        return self.any_ok

    def within(self, windows: list[tuple[float, float]]) -> list[dict[str, Any]]:
        first = min(start for start, _ in windows)
        last = max(end for _, end in windows)
        invoked: list[tuple[np.ndarray, np.ndarray]] = []  # after the first window's start
        parts: list[pa.Table] = []  # ok rows completed inside the windows' span
        for part in op_row_groups(self.parquet, self.columns):
            part = where_in(part, "f", ["send", "txn"])
            if not part.num_rows:
                continue
            wall = pc.fill_null(part.column("wall").cast(pa.float64()), float("nan"))
            late = pc.greater(wall, first)
            inv = part.filter(pc.and_(pc.equal(part.column("type"), "invoke"), late))
            invoked.append((int_column(inv, "index"), _floats(inv.column("wall"))))
            span = pc.and_(late, pc.less(wall, last))
            parts.append(part.filter(pc.and_(pc.equal(part.column("type"), "ok"), span)))
        if not parts:
            return []
        ok = pa.concat_tables(parts)
        index = np.concatenate([i for i, _ in invoked])
        walls = np.concatenate([w for _, w in invoked])
        order = np.argsort(index, kind="stable")
        index, walls = index[order], walls[order]
        wanted = int_column(ok, "invoke_index")
        at = np.clip(np.searchsorted(index, wanted), 0, max(len(index) - 1, 0))
        found = (index[at] == wanted) if len(index) else np.zeros(len(wanted), dtype=bool)
        invoke_wall = np.where(found, walls[at] if len(walls) else 0.0, np.nan)
        done = _floats(ok.column("wall"))
        inside = np.zeros(ok.num_rows, dtype=bool)
        for start, end in windows:  # NaN (no invocation, no wall) is inside none
            inside |= (start < invoke_wall) & (done < end)
        chosen = ok.filter(pa.array(inside))
        walls_in = pa.array(invoke_wall[inside], pa.float64())
        return chosen.append_column("invoke_wall", walls_in).to_pylist()


def _floats(col: pa.ChunkedArray) -> np.ndarray:
    filled = pc.fill_null(col.cast(pa.float64()), float("nan"))
    return np.asarray(filled.to_numpy(), dtype=np.float64)


def send_ops(ops: pa.Table) -> OpRows:
    """`sends_with_walls` of op rows as an Arrow table: the same rows, in `SEND_COLUMNS` and
    `invoke_wall`, decoded a batch at a time when read (the invocations' walls are joined as
    arrays, never as a dict of every op)."""
    ops = select(ops, SEND_COLUMNS)
    inv = where_in(ops, "type", ["invoke"])
    ok = where_in(where_in(ops, "type", ["ok"]), "f", ["send", "txn"])
    if "wall" in inv.column_names:
        inv_index = int_column(inv, "index")
        walls = inv.column("wall").combine_chunks()
    else:
        inv_index, walls = np.empty(0, np.int64), pa.array([], pa.float64())
    order = np.argsort(inv_index, kind="stable")
    sorted_index = inv_index[order]
    # The last invocation of an index answers, as the dict sends_with_walls builds does.
    wanted = int_column(ok, "invoke_index") if "invoke_index" in ok.column_names else None
    if wanted is None or not len(sorted_index):
        invoke_wall = pa.nulls(ok.num_rows, pa.float64())
    else:
        pos = np.searchsorted(sorted_index, wanted, side="right") - 1
        found = (pos >= 0) & (sorted_index[np.clip(pos, 0, None)] == wanted)
        if "invoke_index" in ok.column_names:
            found &= np.asarray(ok.column("invoke_index").is_valid(), dtype=bool)
        at = order[np.clip(pos, 0, None)]
        picked = walls.take(pa.array(at, pa.int64()))
        invoke_wall = pc.if_else(pa.array(found), picked, pa.scalar(None, pa.float64()))
    return OpRows(ok.append_column("invoke_wall", invoke_wall))


def check_logs(
    logs: dict[str, MetadataLog],
    cluster: dict[str, Any],
    high_watermark: int | None = None,
    sends: Iterable[dict[str, Any]] | None = None,
    corroborated_ops: set[int] | None = None,
    observers: dict[str, MetadataLog] | None = None,
    observed: MetadataInput | None = None,
    data_logs: dict[str, DataLog] | None = None,
    liveness: LivenessInput | None = None,
    acked: Sends | None = None,
) -> MetadataLogResult:
    """`logs`: the voters' decoded logs; `observers`: broker-only nodes' (never counted toward a
    majority); `observed`: the observer samples, for the brokers' applied offsets; `liveness`:
    the fault, observer and controller-log evidence for the lease liveness rules (liveness.py);
    `acked`: the history's sends as arrays, for the data-log attribution (else read from
    `sends`)."""
    result = MetadataLogResult()
    observers = dict(observers or {})
    nodes = cluster.get("nodes") or []
    controllers = [
        n["name"] for n in nodes if "controller" in (n.get("roles") or []) and "name" in n
    ]
    if controllers:
        for name in sorted(set(logs) - set(controllers)):
            # A voter is what cluster.json says, whatever directory its file was found in.
            result.notes.append(f"metadata/{name}.txt: not a controller in {CLUSTER_JSON}")
            observers.setdefault(name, logs[name])
        logs = {n: log for n, log in logs.items() if n in controllers}
    for log in [*logs.values(), *observers.values()]:
        result.notes.extend(log.notes)
    voters = len(controllers)
    if not voters:
        # Without the quorum's size a majority cannot be counted; every file is a voter at most.
        voters = len(logs)
        result.notes.append(f"no {CLUSTER_JSON} controllers: assuming {voters} voters")
    majority = majority_bound(logs, voters)
    bound = with_watermark(majority, high_watermark)
    if bound.last < 0:
        if observed is not None:
            result.notes += unjudged_note(observed, "nothing in the metadata logs is committed")
        result.findings.append(
            Finding(
                "metadata-log-unknown",
                None,
                (),
                f"nothing in {len(logs)} metadata log(s) is proven committed ({bound.why}): "
                "divergence and fencing cannot be judged",
                unknown=True,
            )
        )
        return result
    result.checked = True
    result.notes.append(f"metadata logs: committed up to offset {bound.last}: {bound.why}")
    committed = list(committed_records(logs, bound.last))
    result.findings += divergence(logs, bound.last, result.notes)
    result.findings += feature_levels(logs, bound.last)
    result.findings += broker_epochs(committed)
    result.findings += leader_epochs(committed)
    committed_entries = committed_log(logs, majority)
    result.findings += deposed_leader_writes(committed_entries)
    result.findings += logged_migration_regressions(committed_entries)
    result.findings += logged_migration_skips(committed_entries)
    result.findings += observer_divergence(observers, logs, majority, result.notes)
    timeout = SESSION_TIMEOUT_MS.get(cluster.get("timing", "default"), 9000)
    if liveness is not None:
        live = lease_liveness(committed_entries, logs, cluster, liveness, timeout)
        result.findings += live.findings
        result.notes += live.notes
        result.stats.update(live.stats)
    if observed is not None:
        found, notes = applied_beyond_commit(observed, logs, controllers, bound.last)
        result.findings += found
        result.notes += notes
    node_ids = {n["name"]: n["node_id"] for n in nodes if "name" in n and "node_id" in n}
    if sends and node_ids:
        attributed = None
        # Only the sends inside some fence's window are judged, and only they keep their
        # attribution: the rest are counted (a queue run has millions).
        judged = sends_within(sends, lease_windows(committed, logs, timeout))
        topic = next((d.topic for d in (data_logs or {}).values() if d.topic), None)
        if data_logs and topic:
            if acked is None and isinstance(sends, SendRows):
                acked = Sends.from_parquet(sends.parquet)
            attributed = attribute(
                acked if acked is not None else sends,
                data_logs,
                partition_leaders(committed, topic),
                {op["index"] for op in judged},
            )
            result.notes += attributed.notes
            result.notes.append(
                f"data logs: {attributed.n_placed} acknowledged send/txn ops attributed to "
                f"the leader that appended them; {len(attributed.unplaced)} with a write found "
                "in no final log"
            )
        found, suspects = lease_violations(
            committed,
            logs,
            judged,
            node_ids,
            timeout,
            corroborated_ops or set(),
            attributed=attributed,
        )
        result.findings += found
        if suspects:
            shown = ", ".join(map(str, suspects[:10])) + (" …" if len(suspects) > 10 else "")
            result.notes.append(
                f"lease: {len(suspects)} acknowledged sends (ops {shown}) named a broker as "
                "leader after a committed record fenced it; not findings, because a send's node "
                "is the client's leader map, not the broker that acknowledged"
            )
    return result


@dataclass
class MetadataLogRead:
    """A run's `metadata/` as read: the voters' and the observers' logs, or why they could not
    be read."""

    directory: Path
    voters: dict[str, MetadataLog] = field(default_factory=dict)
    observers: dict[str, MetadataLog] = field(default_factory=dict)
    error: MetadataLogError | None = None


def read_run_metadata(run_dir: str | Path) -> MetadataLogRead | None:
    """None when the run has no `metadata/` directory."""
    d = Path(run_dir) / METADATA_DIR
    if not d.is_dir():
        return None
    try:
        voters = read_metadata_logs(d)
        observers = read_metadata_logs(d / OBSERVERS_DIR) if (d / OBSERVERS_DIR).is_dir() else {}
    except MetadataLogError as e:
        return MetadataLogRead(d, error=e)
    return MetadataLogRead(d, voters, observers)


def check_run_metadata(
    run_dir: str | Path,
    op_rows: list[dict[str, Any]],
    high_watermark: int | None,
    corroborated_ops: set[int],
    observed: MetadataInput | None = None,
    data_logs: dict[str, DataLog] | None = None,
    liveness: LivenessInput | None = None,
    acked: Sends | None = None,
) -> MetadataLogResult | None:
    """None when the run has no `metadata/` directory; an unreadable log is one unknown finding."""
    read = read_run_metadata(run_dir)
    if read is None:
        return None
    cluster = read_cluster(Path(run_dir))
    return check_read_metadata(
        read,
        cluster,
        op_rows,
        high_watermark,
        corroborated_ops,
        observed,
        data_logs,
        liveness,
        acked,
    )


def check_read_metadata(
    read: MetadataLogRead,
    cluster: dict[str, Any],
    op_rows: list[dict[str, Any]] | pa.Table | SendRows,
    high_watermark: int | None,
    corroborated_ops: set[int],
    observed: MetadataInput | None = None,
    data_logs: dict[str, DataLog] | None = None,
    liveness: LivenessInput | None = None,
    acked: Sends | None = None,
) -> MetadataLogResult:
    """check_logs over a run's logs as read (an unreadable log: one unknown finding);
    `cluster`: its cluster.json; `op_rows`: the send/txn op rows, every column, as dicts or
    as an Arrow table (read a batch at a time: `send_ops`), or a history's, read only when
    a fence's window asks (`SendRows`)."""
    if read.error is not None:
        e = read.error
        return MetadataLogResult(
            [Finding("metadata-log-unreadable", None, (), str(e), unknown=True)], [str(e)]
        )
    if not read.voters:
        return MetadataLogResult(notes=[f"{read.directory}: no decoded metadata logs"])
    if isinstance(op_rows, SendRows):
        sends: Iterable[dict[str, Any]] = op_rows
    elif isinstance(op_rows, pa.Table):
        sends = send_ops(op_rows)
    else:
        sends = sends_with_walls(op_rows)
    return check_logs(
        read.voters,
        cluster,
        high_watermark,
        sends,
        corroborated_ops,
        read.observers,
        observed,
        data_logs,
        liveness,
        acked,
    )
