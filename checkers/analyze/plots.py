"""The analysis's plots, as inline SVG (analysis.html fetches nothing)."""

from __future__ import annotations

import io

import pandas as pd

COLORS = {
    "valid": "#2e8b57",
    "invalid": "#c0392b",
    "crashed": "#8e44ad",
    "unknown": "#e67e22",
    "not checked": "#95a5a6",
}


def _svg(fig: object) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    text = buf.getvalue()
    return text[text.index("<svg") :]  # the XML prolog is not allowed inside HTML


def _figure(width: float, height: float) -> tuple[object, object]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    return plt.subplots(figsize=(width, height))


def verdicts_per_night(runs: pd.DataFrame) -> str:
    """Stacked bars: how many runs of each verdict every night."""
    table = runs.pivot_table(index="night", columns="status", values="path", aggfunc="size")
    table = table.fillna(0).sort_index()
    fig, ax = _figure(max(5.0, 0.5 * len(table) + 2), 3.2)
    bottom = pd.Series(0.0, index=table.index)
    for status, color in COLORS.items():
        if status in table:
            ax.bar(table.index, table[status], bottom=bottom, color=color, label=status)
            bottom += table[status]
    ax.set_ylabel("runs")
    ax.set_xlabel("night")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(axis="x", labelrotation=30)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title("Verdicts per night")
    return _svg(fig)


def scenario_matrix(by_night: pd.DataFrame) -> str:
    """Scenario × night, colored by the share of valid runs (green all, red none)."""
    share = by_night.assign(share=by_night["valid"] / by_night["runs"]).pivot_table(
        index="scenario", columns="night", values="share", aggfunc="mean"
    )
    share = share.sort_index().reindex(sorted(share.columns), axis=1)
    fig, ax = _figure(max(5.0, 0.6 * share.shape[1] + 5), max(2.0, 0.32 * share.shape[0] + 1.2))
    image = ax.imshow(share.to_numpy(dtype=float), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(share.shape[1]), share.columns, rotation=30, ha="right")
    ax.set_yticks(range(share.shape[0]), share.index, fontsize=8)
    bar = fig.colorbar(image, ax=ax, fraction=0.04)  # type: ignore[attr-defined]
    bar.set_label("share of valid runs")
    ax.set_title("Each scenario's verdict per night (blank: not run)")
    return _svg(fig)


def kinds_per_night(kinds: pd.DataFrame) -> str:
    """Stacked bars: failing findings of each kind every night."""
    table = kinds.pivot_table(index="night", columns="kind", values="findings", aggfunc="sum")
    table = table.fillna(0).sort_index()
    fig, ax = _figure(max(5.0, 0.5 * len(table) + 2), 3.2)
    bottom = pd.Series(0.0, index=table.index)
    for kind in table.columns:
        ax.bar(table.index, table[kind], bottom=bottom, label=kind)
        bottom += table[kind]
    ax.set_ylabel("failing findings")
    ax.set_xlabel("night")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(axis="x", labelrotation=30)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    ax.set_title("Finding kinds per night")
    return _svg(fig)
