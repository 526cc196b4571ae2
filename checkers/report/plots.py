"""Matplotlib figures as base64 PNG. Small histories are drawn op by op; large ones from bins,
so the cost and the image size do not grow with the number of operations."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")  # no display on a test runner or a CI box
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from checkers.report.data import BINS, Fault, ReportData, Sample

COLORS = {"ok": "#4c9a2a", "fail": "#d4a017", "info": "#c0392b"}
MAX_LANES = 200


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _legend(ax: plt.Axes) -> None:
    """The legend beside the axes, right of them: inside, it hid the ops, latencies or epochs
    drawn under it (a busy run fills every corner)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), borderaxespad=0, fontsize=8)


def _shade(ax: plt.Axes, faults: list[Fault]) -> None:
    names = sorted({f.name for f in faults})
    palette = plt.get_cmap("tab10")
    for f in faults:
        color = palette(names.index(f.name) % 10)
        ax.axvspan(f.start_s, f.end_s, color=color, alpha=0.15, lw=0)
    for i, n in enumerate(names):
        ax.axvspan(0, 0, color=palette(i % 10), alpha=0.3, label=n)


def _lanes(ops: pd.DataFrame) -> tuple[np.ndarray, int]:
    procs = sorted(ops["process"].unique(), key=lambda p: (len(p), p))
    rank = {p: i for i, p in enumerate(procs)}
    lanes = ops["process"].map(rank).to_numpy(dtype=np.int64)
    if len(procs) > MAX_LANES:
        lanes = lanes * MAX_LANES // len(procs)
        return lanes, MAX_LANES
    return lanes, len(procs)


def binned(data: ReportData) -> bool:
    """Drawn from the aggregates alone: too many ops to draw one by one (data.PER_OP_LIMIT)."""
    return data.ops is None


def timeline(data: ReportData) -> str:
    return _png(timeline_figure(data))


def timeline_figure(data: ReportData) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(12, 4))
    n = data.n_ops
    if data.ops is not None:
        ops = data.ops
        lanes, n_lanes = _lanes(ops) if len(ops) else (np.array([]), 0)
        for t, color in COLORS.items():
            sel = (ops["type"] == t).to_numpy()
            ax.hlines(
                lanes[sel], ops["start_s"][sel], ops["end_s"][sel], colors=color, lw=3, label=t
            )
        ax.set_title(f"operations by process ({n} ops, one line each)")
    else:
        # Each cell shows the worst outcome of any op that ended in it: info > fail > ok.
        grid, n_lanes = _grouped_lanes(data.agg.worst)
        cmap = matplotlib.colors.ListedColormap(["white", *COLORS.values()])
        ax.imshow(grid, aspect="auto", cmap=cmap, vmin=0, vmax=3, interpolation="nearest",
                  extent=(0, data.end_s, n_lanes - 0.5, -0.5))  # fmt: skip
        for t, c in COLORS.items():
            ax.plot([], [], color=c, lw=6, label=t)
        ax.set_title(f"operations by process ({n} ops in {BINS} time bins; worst outcome)")
    _shade(ax, data.faults)
    ax.set_xlim(0, max(data.end_s, 1e-9))
    ax.set_xlabel("run time (s)")
    if n and n_lanes < MAX_LANES and n_lanes <= 40:
        ax.set_yticks(range(n_lanes), data.agg.processes)
    ax.set_ylabel("process" if n_lanes < MAX_LANES else "process (grouped)")
    _legend(ax)
    return fig


def _grouped_lanes(worst: np.ndarray) -> tuple[np.ndarray, int]:
    """One row per process (in lane order), or MAX_LANES rows each the worst of its group."""
    if len(worst) <= MAX_LANES:
        return worst, len(worst)
    lane = np.arange(len(worst)) * MAX_LANES // len(worst)
    grid = np.zeros((MAX_LANES, worst.shape[1]), dtype=worst.dtype)
    np.maximum.at(grid, lane, worst)
    return grid, MAX_LANES


def rates(data: ReportData) -> str:
    return _png(rates_figure(data))


def rates_figure(data: ReportData) -> plt.Figure:
    fig, (lat, thr) = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    edges, qs = data.agg.latency_quantiles()
    mid = (edges[:-1] + edges[1:]) / 2
    drawn = list(qs.values())
    if data.ops is not None:
        ok = data.ops[data.ops["type"] == "ok"]
        ms = ((ok["end_s"] - ok["start_s"]) * 1000).to_numpy(dtype=float)
        lat.scatter(ok["start_s"], ms, s=2, color="#888", label="ok op")
        drawn.append(ms)  # the limits hold every dot, not only the quantile lines
    for q, style in zip(qs, ("-", "--", ":"), strict=True):
        lat.plot(mid, qs[q], style, color="#1f4e79", label=f"p{int(q * 100)}" if q < 1 else "max")
    # Log scale with a margin: equal latencies otherwise zoom into float noise.
    finite = np.concatenate([v[np.isfinite(v)] for v in drawn] or [np.array([])])
    finite = finite[finite > 0]
    if len(finite):
        # Limits first: a single latency would otherwise give log scale identical limits.
        lat.set_ylim(finite.min() / 2, finite.max() * 2)
        lat.set_yscale("log")
    lat.set_ylabel("latency of ok ops (ms)")
    _legend(lat)
    edges, per_type = data.agg.throughput()
    for t, y in per_type.items():
        thr.step(edges[:-1], y, where="post", color=COLORS[t], label=t)
    thr.set_ylabel("completions / s")
    thr.set_xlabel("run time (s)")
    _legend(thr)
    for ax in (lat, thr):
        _shade(ax, data.faults)
    thr.set_xlim(0, max(data.end_s, 1e-9))
    return fig


def has_epochs(samples: list[Sample]) -> bool:
    """KRaft samples carry Raft epochs; ZooKeeper-mode brokers only ActiveControllerCount."""
    return any(s.epoch is not None for s in samples)


def _bars(ax: plt.Axes, samples: list[Sample], nodes: list[str], end_s: float, on) -> None:
    """A node is drawn as leading from a sample saying so until its next sample."""
    palette = plt.get_cmap("tab10")
    for i, node in enumerate(nodes):
        mine = [s for s in samples if s.node == node]
        # Consecutive samples saying so are one bar: one collection per node, not per sample
        # (a 10-minute run's thousands of bars took half the report's CPU to draw).
        spans: list[tuple[float, float]] = []
        start: float | None = None
        for a, b in zip(mine, [*mine[1:], None], strict=True):
            if on(a) and start is None:
                start = a.time_s
            if start is not None and (b is None or not on(b)):
                until = b.time_s if b else end_s
                spans.append((start, until - start))
                start = None
        if spans:
            ax.broken_barh(spans, (i - 0.4, 0.8), color=palette(i % 10))
    ax.set_yticks(range(len(nodes)), nodes)


def quorum(samples: list[Sample], faults: list[Fault], end_s: float) -> str:
    return _png(quorum_figure(samples, faults, end_s))


def quorum_figure(samples: list[Sample], faults: list[Fault], end_s: float) -> plt.Figure:
    nodes = sorted({s.node for s in samples})
    if not has_epochs(samples):
        fig, lead = plt.subplots(1, 1, figsize=(12, 2.5))
        _bars(lead, samples, nodes, end_s, lambda s: bool(s.active))
        lead.set_ylabel("active controller\n(own view)")
        lead.set_xlabel("run time (s)")
        _shade(lead, faults)
        lead.set_xlim(0, max(end_s, 1e-9))
        return fig
    fig, (ep, lead) = plt.subplots(2, 1, figsize=(12, 4.5), sharex=True)
    palette = plt.get_cmap("tab10")
    for i, node in enumerate(nodes):
        mine = [s for s in samples if s.node == node]
        xs = [s.time_s for s in mine]
        ep.step(xs, [s.epoch if s.epoch is not None else np.nan for s in mine], where="post",
                color=palette(i % 10), label=node)  # fmt: skip
    _bars(lead, samples, nodes, end_s, lambda s: s.state == "leader")
    ep.set_ylabel("Raft epoch")
    # Epochs are whole numbers: a steady epoch 4 otherwise gets ticks 3.8, 3.9, ... 4.2.
    ep.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    _legend(ep)
    lead.set_ylabel("leader (own view)")
    lead.set_xlabel("run time (s)")
    for ax in (ep, lead):
        _shade(ax, faults)
    lead.set_xlim(0, max(end_s, 1e-9))
    return fig


def share_rates(
    edges: np.ndarray, lines: dict[str, np.ndarray], faults: list[Fault], end_s: float
) -> str:
    """Each share consumer's deliveries per second (checkers/report/share.py), faults shaded."""
    fig, ax = plt.subplots(1, 1, figsize=(12, 3.2))
    palette = plt.get_cmap("tab20")
    for i, (name, y) in enumerate(lines.items()):
        ax.step(edges, y, where="post", color=palette(i % 20), label=name, lw=1.2)
    ax.set_ylabel("deliveries / s")
    ax.set_xlabel("run time (s)")
    _shade(ax, faults)
    ax.set_xlim(0, max(end_s, 1e-9))
    _legend(ax)
    return _png(fig)
