"""What the report plots, folded from history.parquet one row group at a time.

Whatever the history's size, the report holds a few columns of one row group, one time per op
index (to give each completion its invocation's time), and aggregates whose size does not grow
with the ops: per `f`, per outcome and per time bin, the completions, a histogram of latencies
on a log scale and the exact maximum; per process, the worst outcome per timeline bin. A history
of at most PER_OP_LIMIT client completions also keeps them one per row (`ReportData.ops`), for
the plots that draw every op.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from checkers.scan.fault_windows import TIME, fault_windows
from history.columnar import index_bound, op_row_groups, op_rows_at_most, op_rows_of
from history.format import CLIENT_PROCESS_TEXT, MIGRATION, NEMESIS, OBSERVER

OUTCOMES = ("ok", "fail", "info")
# Above this many client completions the report draws from the aggregates alone.
PER_OP_LIMIT = 20_000
# Time bins of the binned timeline, and at most of the latency and throughput plots.
BINS = 400
# Latency bins (ms): [0, 1 ns), then LAT_PER_DECADE log-spaced bins a decade from 1 ns to
# 10^7 ms (beyond: the last bin). A quantile read from them is within one bin's width
# (10^(1/64), 3.7 %) of the exact one, and never outside the exact minimum and maximum kept
# beside them.
LAT_PER_DECADE = 64
LAT_EDGES = np.concatenate([[0.0], np.logspace(-6, 7, 13 * LAT_PER_DECADE + 1)])
LAT_MIDS = np.concatenate([[LAT_EDGES[1] / 2], np.sqrt(LAT_EDGES[1:-1] * LAT_EDGES[2:])])
LAT_RATIO = 10 ** (1 / LAT_PER_DECADE)
_CLIENT = re.compile(CLIENT_PROCESS_TEXT)
_NO_TIME = np.iinfo(np.int64).min
FOLD_COLUMNS = ["index", "invoke_index", "type", "f", "process", "time", "node"]


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
class FStats:
    """One `f`'s client completions, per outcome (OUTCOMES) and per time bin."""

    completions: np.ndarray  # [outcome, bin]: by completion time
    latency: np.ndarray  # [outcome, bin, latency bin]: by invocation time
    max_ms: np.ndarray  # [outcome, bin]: the exact maximum latency, NaN for none
    min_ms: np.ndarray  # [outcome, bin]: the exact minimum latency, NaN for none


@dataclass
class Aggregates:
    end_s: float
    edges: np.ndarray  # the time bins of latency and throughput (s)
    by_f: dict[str, FStats]
    processes: list[str]  # client processes, in lane order
    worst: np.ndarray  # [process, BINS]: 0 none, 1 ok, 2 fail, 3 info (the worst op that ended)
    n_ops: int  # client completions

    def throughput(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Completions per second per time bin, per outcome (all fs)."""
        width = self.edges[1] - self.edges[0]
        counts = sum((s.completions for s in self.by_f.values()), np.zeros((3, self.bins)))
        return self.edges, {t: counts[i] / width for i, t in enumerate(OUTCOMES)}

    @property
    def bins(self) -> int:
        return len(self.edges) - 1

    def latency_quantiles(
        self, qs: tuple[float, ...] = (0.5, 0.95, 1.0), outcome: str = "ok", f: str | None = None
    ) -> tuple[np.ndarray, dict[float, np.ndarray]]:
        """Per time bin (by invocation), latency quantiles in ms of `outcome` ops (of one `f`,
        or all); NaN for empty bins. 1.0 is the exact maximum; the others within a bin width."""
        o = OUTCOMES.index(outcome)
        stats = [s for name, s in self.by_f.items() if f is None or name == f]
        hist = sum((s.latency[o] for s in stats), np.zeros((self.bins, len(LAT_MIDS))))
        none = np.full(self.bins, np.nan)
        top = np.fmax.reduce([s.max_ms[o] for s in stats]) if stats else none
        bottom = np.fmin.reduce([s.min_ms[o] for s in stats]) if stats else none
        out = {}
        for q in qs:
            out[q] = top if q == 1.0 else np.clip(hist_quantile(hist, q), bottom, top)
        return self.edges, out

    def summary(self, qs: tuple[float, ...] = (0.5, 0.95, 0.99)) -> list[dict[str, Any]]:
        """Per f: completions per outcome, and the whole run's latency quantiles of ok ops."""
        rows = []
        for name, s in sorted(self.by_f.items()):
            row: dict[str, Any] = {"f": name}
            for i, t in enumerate(OUTCOMES):
                row[t] = int(s.completions[i].sum())
            whole = s.latency[0].sum(axis=0)
            top = float(np.fmax.reduce(s.max_ms[0])) if row["ok"] else float("nan")
            bottom = float(np.fmin.reduce(s.min_ms[0])) if row["ok"] else float("nan")
            for q in qs:
                row[f"p{round(q * 100)}"] = float(np.clip(hist_quantile(whole, q), bottom, top))
            row["max"] = top
            rows.append(row)
        return rows


def hist_quantile(hist: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of the latencies counted in `hist` (last axis: LAT_EDGES bins), as pandas
    computes it (linear between the order statistics around (n-1)q), each order statistic
    taken at its bin's middle; NaN where nothing was counted."""
    n = hist.sum(axis=-1)
    cum = np.cumsum(hist, axis=-1)
    r = np.maximum(n - 1, 0) * q
    k = np.floor(r)
    frac = r - k
    last = len(LAT_MIDS) - 1
    at = np.minimum((cum <= k[..., None]).sum(axis=-1), last)
    above = np.minimum((cum <= np.minimum(k + 1, np.maximum(n - 1, 0))[..., None]).sum(-1), last)
    est = (1 - frac) * LAT_MIDS[at] + frac * LAT_MIDS[above]
    return np.where(n > 0, est, np.nan)


@dataclass
class ReportData:
    agg: Aggregates
    # Client completions one per row (index, type, f, process, node, start_s, end_s) when there
    # are at most PER_OP_LIMIT of them; None for a bigger history (drawn from `agg` alone).
    ops: pd.DataFrame | None = None
    faults: list[Fault] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    end_s: float = 0.0
    # Migration steps (topology migration): invocation to completion, named "<f> <node>: <type>".
    migration: list[Fault] = field(default_factory=list)

    @property
    def n_ops(self) -> int:
        return self.agg.n_ops


def load(parquet: str | Path) -> ReportData:
    times, end_ns = _invoke_times(parquet)
    end_s = end_ns / 1e9
    agg, ops = _fold(parquet, times, end_s)
    del times
    special = op_rows_of(
        parquet,
        [NEMESIS, OBSERVER, MIGRATION],
        ["index", "invoke_index", "type", "f", "process", "time", "node", "value_json"],
    ).to_pylist()
    return ReportData(
        agg=agg,
        ops=ops,
        faults=_faults(special, end_s),
        samples=_samples(special),
        end_s=end_s,
        migration=_migration_steps(special, end_s),
    )


def _invoke_times(parquet: str | Path) -> tuple[np.ndarray, int]:
    """(time of each op row by its index, _NO_TIME where none; the last time of any op row),
    one row group at a time: an op index is its history line, so the array is as long as the
    history has op rows."""
    bound = index_bound(parquet)
    size = op_rows_at_most(parquet) if bound is None else bound
    times = np.full(size, _NO_TIME, dtype=np.int64)
    end = None
    for part in op_row_groups(parquet, ["index", "time"]):
        if not part.num_rows:
            continue
        index = _ints(part.column("index"), -1)
        t = _ints(part.column("time"), _NO_TIME)
        keep = (index >= 0) & (t != _NO_TIME)
        index, t = index[keep], t[keep]
        if not len(index):
            continue
        if index.max() >= len(times):
            grown = np.full(max(int(index.max()) + 1, 2 * len(times)), _NO_TIME, dtype=np.int64)
            grown[: len(times)] = times
            times = grown
        times[index] = t
        top = int(t.max())
        end = top if end is None else max(end, top)
    return times, (end or 0)


def _ints(col: pa.ChunkedArray, null: int) -> np.ndarray:
    col = pc.fill_null(col, null) if col.null_count else col
    return np.asarray(col.to_numpy(), dtype=np.int64)


class _Codes:
    """A dictionary column's values as small ints of one numbering across row groups, each
    row group's dictionary looked up once rather than every row decoded."""

    def __init__(self, code: Any) -> None:
        self.code = code  # str | None -> int
        self.cache: dict[str | None, int] = {}

    def of(self, col: pa.Array) -> np.ndarray:
        """The code of each row; only the dictionary entries some row uses are looked up (a
        row group's dictionary may name values of rows filtered out)."""
        if not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(col)
        names = [*col.dictionary.to_pylist(), None]  # the last answers for null rows
        idx = col.indices
        idx = pc.fill_null(idx, len(names) - 1) if idx.null_count else idx
        at = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)
        table = np.full(len(names), -1, dtype=np.int64)
        for u in np.flatnonzero(np.bincount(at, minlength=len(names))).tolist():
            table[u] = self._one(names[u])
        return table[at]

    def _one(self, name: str | None) -> int:
        if name not in self.cache:
            self.cache[name] = self.code(name)
        return self.cache[name]


class _Fold:
    def __init__(self, end_s: float, keep_ops: bool) -> None:
        self.end_s = end_s
        bins = min(BINS, max(10, int(end_s)))
        self.edges = np.linspace(0, max(end_s, 1e-9), bins + 1)
        self.fs: list[str] = []
        self.by_f: list[FStats] = []
        self.processes: list[str] = []
        self.worst = np.zeros((16, BINS), dtype=np.int8)
        self.n_ops = 0
        self.ops: list[pd.DataFrame] | None = [] if keep_ops else None
        self.outcome = _Codes(lambda t: OUTCOMES.index(t) if t in OUTCOMES else -1)
        self.f = _Codes(self._f)
        self.client = _Codes(lambda p: 0 if p is not None and _CLIENT.fullmatch(p) else -1)
        self.process = _Codes(self._process)

    def _f(self, name: str | None) -> int:
        bins, lat = len(self.edges) - 1, len(LAT_MIDS)
        self.fs.append(name or "")
        self.by_f.append(
            FStats(
                np.zeros((3, bins), dtype=np.int64),
                np.zeros((3, bins, lat), dtype=np.int64),
                np.full((3, bins), np.nan),
                np.full((3, bins), np.nan),
            )
        )
        return len(self.fs) - 1

    def _process(self, name: str | None) -> int:
        self.processes.append(name or "")
        if len(self.processes) > len(self.worst):
            self.worst = np.concatenate([self.worst, np.zeros_like(self.worst)])
        return len(self.processes) - 1

    def add(self, batch: pa.RecordBatch, times: np.ndarray) -> None:
        outcome = self.outcome.of(batch.column("type"))
        mine = np.flatnonzero((outcome >= 0) & (self.client.of(batch.column("process")) >= 0))
        if not len(mine):
            return
        batch = batch.take(pa.array(mine))
        outcome = outcome[mine]
        process = self.process.of(batch.column("process"))
        f = self.f.of(batch.column("f"))
        end_ns = _ints(batch.column("time"), 0)
        end_s = end_ns / 1e9
        invoke = _ints(batch.column("invoke_index"), -1)
        known = (invoke >= 0) & (invoke < len(times))
        start_ns = np.where(known, times[np.where(known, invoke, 0)], _NO_TIME)
        start_s = np.where(start_ns != _NO_TIME, start_ns / 1e9, np.nan)
        self.n_ops += len(mine)
        self._timeline(outcome, process, end_s)
        self._rates(f, outcome, start_s, end_s)
        if self.ops is not None:
            self._keep(batch, start_s, end_s)

    def _timeline(self, outcome: np.ndarray, process: np.ndarray, end_s: np.ndarray) -> None:
        col = np.clip((end_s / max(self.end_s, 1e-9) * BINS).astype(int), 0, BINS - 1)
        for worst in (1, 2, 3):  # ok, fail, info: each cell keeps the worst that ended in it
            sel = outcome == worst - 1
            p, c = process[sel], col[sel]
            self.worst[p, c] = np.maximum(self.worst[p, c], worst)

    def _rates(self, f: np.ndarray, outcome: np.ndarray, start: np.ndarray, end: np.ndarray):
        bins, edges, lat_bins = len(self.edges) - 1, self.edges, len(LAT_MIDS)
        # np.histogram's bins: [a, b) but the last [a, b]; nothing outside [0, end].
        end_bin = np.searchsorted(edges, end, side="right") - 1
        end_bin[end == edges[-1]] = bins - 1
        counted = (end_bin >= 0) & (end_bin < bins)
        timed = np.isfinite(start)
        start_bin = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, bins - 1)
        ms = (end - start) * 1000
        lat_bin = np.clip(np.searchsorted(LAT_EDGES, ms, side="right") - 1, 0, lat_bins - 1)
        for code in np.unique(f).tolist():
            s, mine = self.by_f[code], f == code
            sel = mine & counted
            s.completions += np.bincount(
                outcome[sel] * bins + end_bin[sel], minlength=3 * bins
            ).reshape(3, bins)
            sel = mine & timed
            o, b = outcome[sel], start_bin[sel]
            s.latency += np.bincount(
                (o * bins + b) * lat_bins + lat_bin[sel], minlength=3 * bins * lat_bins
            ).reshape(3, bins, lat_bins)
            np.fmax.at(s.max_ms, (o, b), ms[sel])
            np.fmin.at(s.min_ms, (o, b), ms[sel])

    def _keep(self, batch: pa.RecordBatch, start_s: np.ndarray, end_s: np.ndarray) -> None:
        assert self.ops is not None
        if self.n_ops > PER_OP_LIMIT:
            self.ops = None  # too many to draw one by one: the aggregates draw them
            return
        cols = {n: batch.column(n).to_pylist() for n in ("index", "type", "f", "process")}
        cols["node"] = batch.column("node").to_pylist()
        self.ops.append(pd.DataFrame({**cols, "start_s": start_s, "end_s": end_s}))

    def result(self) -> tuple[Aggregates, pd.DataFrame | None]:
        order = sorted(range(len(self.processes)), key=lambda i: _lane_key(self.processes[i]))
        agg = Aggregates(
            end_s=self.end_s,
            edges=self.edges,
            by_f=dict(zip(self.fs, self.by_f, strict=True)),
            processes=[self.processes[i] for i in order],
            worst=self.worst[order],
            n_ops=self.n_ops,
        )
        if self.ops is None:
            return agg, None
        columns = ["index", "type", "f", "process", "node", "start_s", "end_s"]
        ops = pd.concat(self.ops, ignore_index=True) if self.ops else pd.DataFrame(columns=columns)
        ops = ops[columns].sort_values("index", kind="stable").reset_index(drop=True)
        return agg, ops


def _lane_key(process: str) -> tuple[int, str]:
    return (len(process), process)


def _fold(
    parquet: str | Path, times: np.ndarray, end_s: float
) -> tuple[Aggregates, pd.DataFrame | None]:
    fold = _Fold(end_s, keep_ops=True)
    for part in op_row_groups(parquet, FOLD_COLUMNS):
        for batch in part.to_batches():
            fold.add(batch, times)
    return fold.result()


def _faults(special: list[dict[str, Any]], end_s: float) -> list[Fault]:
    """The checks' own fault spans (checkers/scan/fault_windows.py) in run time: what is shaded is
    what the lease checks judged, a fault counted from its start's invocation (it may act before
    the ok comes back); a start that failed changed nothing and is not shaded."""
    rows = [r for r in special if r["process"] == NEMESIS]
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


def _migration_steps(special: list[dict[str, Any]], end_s: float) -> list[Fault]:
    """Each migration step from its invocation to its completion (one step at a time)."""
    out = []
    begun: dict[str, Any] | None = None
    for r in special:
        if r["process"] != MIGRATION:
            continue
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


def _samples(special: list[dict[str, Any]]) -> list[Sample]:
    out = []
    for r in special:
        if r["process"] != OBSERVER or r["type"] == "invoke" or not r["node"]:
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
