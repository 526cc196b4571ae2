"""What the report plots, computed with vectorized columns so a million ops take seconds."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from checkers.scan.fault_windows import TIME, fault_windows
from history.columnar import OP_ROW
from history.format import CLIENT_PROCESS_TEXT, MIGRATION, NEMESIS, OBSERVER

OP_COLUMNS = ["index", "invoke_index", "type", "f", "process", "time", "node"]


@dataclass
class Fault:
    """One fault period: from its start's invocation to the completion of the stop or heal that
    ended it (the end of the run if none did); a migration step from invocation to completion."""

    name: str
    start_s: float
    end_s: float
    start_index: int
    end_index: int | None


@dataclass
class Sample:
    node: str
    time_s: float
    state: str | None
    leader: int | None
    epoch: int | None
    active: bool | None = None  # ActiveControllerCount >= 1: the only controller view ZK mode has


@dataclass
class ReportData:
    ops: pd.DataFrame  # client completions: index, type, f, process, node, start_s, end_s
    faults: list[Fault] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    end_s: float = 0.0
    # Migration steps (topology migration): invocation to completion, named "<f> <node>: <type>".
    migration: list[Fault] = field(default_factory=list)


def load(parquet: str | Path) -> ReportData:
    table = pq.read_table(parquet, columns=OP_COLUMNS, filters=[("row", "=", OP_ROW)])
    df = table.to_pandas()
    end_s = float(df["time"].max()) / 1e9 if len(df) else 0.0
    invoke_time = pd.Series(df["time"].to_numpy(), index=df["index"].to_numpy())
    done = df[df["type"] != "invoke"].copy()
    inv = done["invoke_index"].to_numpy()
    done["start_s"] = invoke_time.reindex(inv).to_numpy() / 1e9
    done["end_s"] = done["time"].to_numpy() / 1e9
    clients = done[done["process"].str.fullmatch(CLIENT_PROCESS_TEXT, na=False)]
    return ReportData(
        ops=clients[["index", "type", "f", "process", "node", "start_s", "end_s"]].reset_index(
            drop=True
        ),
        faults=_faults(parquet, end_s),
        samples=_samples(parquet),
        end_s=end_s,
        migration=_migration_steps(parquet, end_s),
    )


def _special_rows(parquet: str | Path, process: str) -> list[dict[str, Any]]:
    filters = [("row", "=", OP_ROW), ("process", "=", process)]
    cols = ["index", "type", "f", "time", "node", "value_json"]
    return pq.read_table(parquet, columns=cols, filters=filters).to_pylist()


def _faults(parquet: str | Path, end_s: float) -> list[Fault]:
    """The checks' own fault spans (checkers/scan/fault_windows.py) in run time: what is shaded is
    what the lease checks judged, a fault counted from its start's invocation (it may act before
    the ok comes back); a start that failed changed nothing and is not shaded."""
    filters = [("row", "=", OP_ROW), ("process", "=", NEMESIS)]
    cols = ["index", "invoke_index", "type", "f", "process", "time", "node", "value_json"]
    rows = pq.read_table(parquet, columns=cols, filters=filters).to_pylist()
    spans = fault_windows(rows, (), clock=TIME).spans
    out = [
        Fault(
            s.package,
            s.outer[0],
            min(s.outer[1], end_s),
            s.start.invoke_index,
            s.end.index if s.end is not None else None,
        )
        for s in spans
    ]
    return sorted(out, key=lambda x: x.start_s)


def _migration_steps(parquet: str | Path, end_s: float) -> list[Fault]:
    """Each migration step from its invocation to its completion (one step at a time)."""
    out = []
    begun: dict[str, Any] | None = None
    for r in _special_rows(parquet, MIGRATION):
        if r["type"] == "invoke":
            begun = r
            continue
        if begun is None:
            continue
        name = f"{r['f']} {r['node'] or ''}".strip() + f": {r['type']}"
        out.append(Fault(name, begun["time"] / 1e9, r["time"] / 1e9, begun["index"], r["index"]))
        begun = None
    if begun is not None:
        name = f"{begun['f']} {begun['node'] or ''}".strip() + ": no completion"
        out.append(Fault(name, begun["time"] / 1e9, end_s, begun["index"], None))
    return out


def _samples(parquet: str | Path) -> list[Sample]:
    out = []
    for r in _special_rows(parquet, OBSERVER):
        if r["type"] == "invoke" or not r["node"]:
            continue
        if r["type"] != "ok" or not r["value_json"]:
            # A node that did not answer (killed, paused, cut off) has no view: an empty sample
            # ends its line and leader bar, so a dead node is not drawn as still leading.
            out.append(Sample(r["node"], r["time"] / 1e9, None, None, None))
            continue
        value = json.loads(r["value_json"])
        if not isinstance(value, dict):
            continue
        raft, count = value.get("raft"), value.get("active_controller_count")
        if not isinstance(raft, dict):
            if not isinstance(count, int):
                continue  # a KRaft broker: no view of the quorum
            raft = {}
        active = count >= 1 if isinstance(count, int) else None
        out.append(
            Sample(
                r["node"],
                r["time"] / 1e9,
                raft.get("state"),
                raft.get("leader"),
                raft.get("epoch"),
                active,
            )
        )
    return out


def throughput(
    ops: pd.DataFrame, end_s: float, bins: int
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Completions per second in `bins` equal time bins, per completion type."""
    edges = np.linspace(0, max(end_s, 1e-9), bins + 1)
    width = edges[1] - edges[0]
    out = {}
    for t in ("ok", "fail", "info"):
        counts, _ = np.histogram(ops.loc[ops["type"] == t, "end_s"], bins=edges)
        out[t] = counts / width
    return edges, out


def latency_quantiles(
    ops: pd.DataFrame, end_s: float, bins: int, qs: tuple[float, ...] = (0.5, 0.95, 1.0)
) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Per time bin (by invocation), latency quantiles in ms of ok ops; NaN for empty bins."""
    edges = np.linspace(0, max(end_s, 1e-9), bins + 1)
    ok = ops[ops["type"] == "ok"]
    lat = (ok["end_s"] - ok["start_s"]).to_numpy() * 1000
    which = np.clip(np.digitize(ok["start_s"].to_numpy(), edges) - 1, 0, bins - 1)
    grouped = pd.Series(lat).groupby(which)
    out = {}
    for q in qs:
        col = np.full(bins, np.nan)
        vals = grouped.quantile(q) if len(lat) else pd.Series(dtype=float)
        col[vals.index.to_numpy(dtype=int)] = vals.to_numpy()
        out[q] = col
    return edges, out
