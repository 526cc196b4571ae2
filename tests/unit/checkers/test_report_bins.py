"""The report's aggregates, folded a row group at a time, against the whole-table pandas path
they replaced (kept here as the reference): same completions per time bin, same worst outcome
per timeline cell, latency quantiles within one latency bin's width, exact maxima."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.report import data as report_data
from checkers.report.data import BINS, LAT_RATIO, load
from history.columnar import OP_ROW, SCHEMA
from history.format import CLIENT_PROCESS_TEXT

MS = 1_000_000


def reference_ops(parquet) -> tuple[pd.DataFrame, float]:
    """checkers/report/data.py's load before it folded: every op row read whole."""
    cols = ["index", "invoke_index", "type", "f", "process", "time", "node"]
    df = pq.read_table(parquet, columns=cols, filters=[("row", "=", OP_ROW)]).to_pandas()
    end_s = float(df["time"].max()) / 1e9 if len(df) else 0.0
    invoke_time = pd.Series(df["time"].to_numpy(), index=df["index"].to_numpy())
    done = df[df["type"] != "invoke"].copy()
    done["start_s"] = invoke_time.reindex(done["invoke_index"].to_numpy()).to_numpy() / 1e9
    done["end_s"] = done["time"].to_numpy() / 1e9
    clients = done[done["process"].astype(str).str.fullmatch(CLIENT_PROCESS_TEXT, na=False)]
    return clients.reset_index(drop=True), end_s


def reference_throughput(ops: pd.DataFrame, end_s: float, bins: int) -> dict[str, np.ndarray]:
    edges = np.linspace(0, max(end_s, 1e-9), bins + 1)
    return {
        t: np.histogram(ops.loc[ops["type"] == t, "end_s"], bins=edges)[0]
        for t in ("ok", "fail", "info")
    }


def reference_latency(
    ops: pd.DataFrame, end_s: float, bins: int, q: float, interpolation: str = "linear"
) -> np.ndarray:
    """Per time bin by invocation, the q-quantile of ok latencies (ms); NaN for empty bins."""
    edges = np.linspace(0, max(end_s, 1e-9), bins + 1)
    ok = ops[ops["type"] == "ok"]
    lat = (ok["end_s"] - ok["start_s"]).to_numpy() * 1000
    which = np.clip(np.digitize(ok["start_s"].to_numpy(), edges) - 1, 0, bins - 1)
    out = np.full(bins, np.nan)
    if len(lat):
        vals = pd.Series(lat).groupby(which).quantile(q, interpolation=interpolation)
        out[vals.index.to_numpy(dtype=int)] = vals.to_numpy()
    return out


ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(["0", "1", "2", "17", "nil", "nemesis"]),  # process
        st.sampled_from(["send", "poll", "txn"]),  # f
        st.sampled_from(["ok", "ok", "fail", "info", None]),  # None: never completed
        st.integers(0, 60_000),  # invocation, ms
        st.one_of(st.integers(0, 5), st.integers(0, 10**10)),  # latency, ns
    ),
    min_size=1,
    max_size=120,
)


def write_history(path, ops, row_group: int) -> None:
    """Op rows in time order (an op index is its line), each completion naming its invocation;
    written in small row groups, some mixed with element rows."""
    rows = []
    for n, (process, f, outcome, start_ms, lat_ns) in enumerate(ops):
        start = start_ms * MS
        rows.append((start, 0, n, "invoke", f, process))
        if outcome is not None:
            rows.append((start + lat_ns, 1, n, outcome, f, process))
    rows.sort()
    invoked: dict[int, int] = {}
    cols: dict[str, list] = {k: [] for k in ("index", "invoke_index", "type", "f", "process")}
    cols["time"] = []
    for index, (t, _, n, type_, f, process) in enumerate(rows):
        if type_ == "invoke":
            invoked[n] = index
        cols["index"].append(index)
        cols["invoke_index"].append(None if type_ == "invoke" else invoked[n])
        cols["type"].append(type_)
        cols["f"].append(f)
        cols["process"].append(process)
        cols["time"].append(t)
    n = len(rows)
    elem = {"row": ["elem"], "index": [0], "type": ["ok"], "f": ["send"], "process": ["0"]}
    tables = [
        _table({"row": [OP_ROW] * n, **cols}, n),
        _table(elem, 1),  # an element row: the last row group is mixed
    ]
    pq.write_table(pa.concat_tables(tables), path, row_group_size=row_group)


def _table(cols: dict, n: int) -> pa.Table:
    arrays = []
    for f in SCHEMA:
        arrays.append(pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


@settings(max_examples=60, deadline=None)
@given(ops=ops_strategy, row_group=st.sampled_from([3, 17, 1 << 20]))
def test_binned_aggregates_agree_with_the_whole_table_path(tmp_path_factory, ops, row_group):
    path = tmp_path_factory.mktemp("h") / "history.parquet"
    write_history(path, ops, row_group)
    ref, end_s = reference_ops(path)
    data = load(path)
    agg = data.agg
    assert data.end_s == end_s and agg.n_ops == len(ref)

    # Completions per time bin, per outcome: the very counts.
    edges, per_s = agg.throughput()
    width = edges[1] - edges[0]
    for t, counts in reference_throughput(ref, end_s, agg.bins).items():
        assert np.rint(per_s[t] * width).astype(int).tolist() == counts.tolist()

    # Latency quantiles within one latency bin of pandas'; the maximum exact.
    _, qs = agg.latency_quantiles((0.5, 0.95, 1.0))
    for q in (0.5, 0.95):
        want = reference_latency(ref, end_s, agg.bins, q)
        # The order statistic above the quantile bounds the error of both around it.
        above = reference_latency(ref, end_s, agg.bins, q, "higher")
        got = qs[q]
        assert np.array_equal(np.isnan(got), np.isnan(want))
        tol = (LAT_RATIO - 1) * above + 1e-6  # 1e-6 ms: the first bin, [0, 1 ns)
        both = ~np.isnan(got)
        assert (np.abs(got[both] - want[both]) <= tol[both]).all()
    want_max = reference_latency(ref, end_s, agg.bins, 1.0)
    assert np.array_equal(qs[1.0], want_max, equal_nan=True)
    want_min = reference_latency(ref, end_s, agg.bins, 0.0)
    for q in (0.5, 0.95):  # never outside what was measured, below 1 ns too
        both = ~np.isnan(qs[q])
        assert (want_min[both] <= qs[q][both]).all() and (qs[q][both] <= want_max[both]).all()

    # The binned timeline: the worst outcome of the ops that ended in each cell.
    procs = sorted(ref["process"].unique(), key=lambda p: (len(p), p))
    assert agg.processes == procs
    grid = np.zeros((len(procs), BINS))
    lane = ref["process"].map({p: i for i, p in enumerate(procs)}).to_numpy(dtype=int)
    col = np.clip((ref["end_s"].to_numpy() / max(end_s, 1e-9) * BINS).astype(int), 0, BINS - 1)
    worst = ref["type"].map({"ok": 1, "fail": 2, "info": 3}).to_numpy()
    np.maximum.at(grid, (lane, col), worst)
    assert np.array_equal(agg.worst, grid)

    # The ops drawn one by one (a small history): the same rows.
    got_ops = data.ops[["index", "type", "process", "start_s", "end_s"]]
    want_ops = ref[["index", "type", "process", "start_s", "end_s"]].astype(got_ops.dtypes)
    pd.testing.assert_frame_equal(got_ops, want_ops, check_categorical=False)


@settings(max_examples=20, deadline=None)
@given(ops=ops_strategy)
def test_a_history_above_the_limit_keeps_no_op_rows_but_the_same_aggregates(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("h") / "history.parquet"
    write_history(path, ops, 5)
    small = load(path)
    limit = report_data.PER_OP_LIMIT
    try:
        report_data.PER_OP_LIMIT = max(0, small.n_ops - 1)
        big = load(path)
    finally:
        report_data.PER_OP_LIMIT = limit
    assert big.ops is None if small.n_ops else big.ops is not None
    assert np.array_equal(big.agg.worst, small.agg.worst)
    assert pd.DataFrame(big.agg.summary()).equals(pd.DataFrame(small.agg.summary()))
    for t, per_s in big.agg.throughput()[1].items():
        assert np.array_equal(per_s, small.agg.throughput()[1][t])


def test_per_f_summary_counts_outcomes_and_reads_quantiles_off_the_histogram(tmp_path):
    ops = [("0", "send", "ok", s, MS * (s % 10 + 1)) for s in range(100)]
    ops += [("1", "poll", "fail", 5, 10), ("1", "poll", "info", 7, 10)]
    path = tmp_path / "history.parquet"
    write_history(path, ops, 1 << 20)
    rows = {r["f"]: r for r in load(path).agg.summary()}
    assert {k: rows["send"][k] for k in ("ok", "fail", "info")} == {"ok": 100, "fail": 0, "info": 0}
    assert {k: rows["poll"][k] for k in ("ok", "fail", "info")} == {"ok": 0, "fail": 1, "info": 1}
    assert abs(rows["send"]["max"] - 10.0) < 1e-6  # ms, exact
    assert abs(rows["send"]["p50"] - 5.5) <= 6 * (LAT_RATIO - 1)  # between 5 ms and 6 ms
    assert np.isnan(rows["poll"]["p50"]) and np.isnan(rows["poll"]["max"])
