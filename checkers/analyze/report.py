"""The cross-run report: anomalies by workload, nemesis and Kafka version, trends over dates,
and the worst runs linked to their own report.html."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from checkers.analyze.runs import RunInfo, find_runs
from checkers.analyze.spark_stats import op_stats

ANALYSIS_NAME = "analysis.html"
WORST = 20

TEMPLATE = jinja2.Environment(autoescape=True).from_string(
    """<!doctype html>
<html><head><meta charset="utf-8"><title>kchaos analysis: {{ root }}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; max-width: 1200px; }
table { border-collapse: collapse; margin: 0.3em 0 1.2em; }
td, th { border: 1px solid #ccc; padding: 2px 8px; font-size: 13px; }
td.bad { color: #c0392b; font-weight: bold; }
</style></head><body>
<h1>kchaos analysis</h1>
<p><code>{{ root }}</code>: {{ n_runs }} runs, {{ n_invalid }} invalid, {{ n_unknown }} unknown,
{{ n_ops }} client operations.</p>
{% for title, table in groups %}<h2>By {{ title }}</h2>{{ table | safe }}{% endfor %}
<h2>Anomaly kinds</h2>{{ kinds | safe }}
<h2>Over dates</h2>{{ dates | safe }}
<h2>Worst runs</h2>
<table><tr><th>run</th><th>status</th><th>failing</th><th>kinds</th><th>workload</th>
<th>nemesis</th><th>version</th><th>ops ok/fail/info</th></tr>
{% for r in worst %}<tr><td>{% if r.link %}<a href="{{ r.link }}">{{ r.name }}</a>{% else %}
{{ r.name }}{% endif %}</td><td class="{{ 'bad' if r.status == 'invalid' else '' }}">
{{ r.status }}</td><td>{{ r.failing }}</td><td>{{ r.kinds }}</td><td>{{ r.workload }}</td>
<td>{{ r.nemesis }}</td><td>{{ r.version }}</td><td>{{ r.ops }}</td></tr>{% endfor %}
</table></body></html>
"""
)


def runs_frame(runs: list[RunInfo], stats: pd.DataFrame) -> pd.DataFrame:
    df = pd.DataFrame(
        [
            {
                "path": str(r.path.resolve()),
                "workload": r.workload,
                "nemesis": r.nemesis,
                "version": r.version,
                "date": r.started.date().isoformat() if r.started else "?",
                "status": r.status,
                "failing": r.n_failing,
                "kinds": ", ".join(f"{k} ({n})" for k, n in sorted(r.failing.items())),
                "has_report": r.has_report,
            }
            for r in runs
        ]
    )
    if df.empty:
        return df
    return df.merge(stats, on="path", how="left").fillna({"ok": 0, "fail": 0, "info": 0})


def _by(df: pd.DataFrame, column: str) -> str:
    g = df.groupby(column).agg(
        runs=("path", "size"),
        invalid=("status", lambda s: int((s == "invalid").sum())),
        unknown=("status", lambda s: int((s == "unknown").sum())),
        failing_findings=("failing", "sum"),
        ok_ops=("ok", "sum"),
        info_ops=("info", "sum"),
    )
    g["invalid_share"] = (g["invalid"] / g["runs"]).map("{:.0%}".format)
    return g.reset_index().to_html(index=False, border=0)


def _kinds(runs: list[RunInfo]) -> str:
    rows = [
        {"kind": k, "workload": r.workload, "nemesis": r.nemesis, "version": r.version, "n": n}
        for r in runs
        for k, n in r.failing.items()
    ]
    if not rows:
        return "<p>No failing findings in any run.</p>"
    df = pd.DataFrame(rows)
    table = df.pivot_table(index="kind", columns="nemesis", values="n", aggfunc="sum", fill_value=0)
    return table.to_html(border=0)


def analyze(root: str | Path, spark: Any, out: str | Path | None = None) -> Path:
    """Writes `analysis.html` (default: in `root`); returns its path."""
    root = Path(root)
    out_path = Path(out) if out else root / ANALYSIS_NAME
    runs = find_runs(root)
    stats = op_stats(spark, [r.path / "history.parquet" for r in runs])
    df = runs_frame(runs, stats)
    worst: list[dict[str, Any]] = []
    if not df.empty:
        ranked = df.assign(rank=df["status"].map({"invalid": 0, "unknown": 1}).fillna(2))
        for _, r in (
            ranked.sort_values(["rank", "failing"], ascending=[True, False]).head(WORST).iterrows()
        ):
            report = Path(r["path"]) / "report.html"
            worst.append(
                {
                    "name": os.path.relpath(r["path"], out_path.parent.resolve()),
                    "link": os.path.relpath(report, out_path.parent.resolve())
                    if r["has_report"]
                    else None,
                    "status": r["status"],
                    "failing": r["failing"],
                    "kinds": r["kinds"],
                    "workload": r["workload"],
                    "nemesis": r["nemesis"],
                    "version": r["version"],
                    "ops": f"{int(r['ok'])}/{int(r['fail'])}/{int(r['info'])}",
                }
            )
    html = TEMPLATE.render(
        root=str(root),
        n_runs=len(df),
        n_invalid=int((df["status"] == "invalid").sum()) if not df.empty else 0,
        n_unknown=int((df["status"] == "unknown").sum()) if not df.empty else 0,
        n_ops=int(df[["ok", "fail", "info"]].to_numpy().sum()) if not df.empty else 0,
        groups=[(c, _by(df, c)) for c in ("workload", "nemesis", "version")]
        if not df.empty
        else [],
        kinds=_kinds(runs),
        dates=_by(df, "date") if not df.empty else "<p>No runs.</p>",
        worst=worst,
    )
    out_path.write_text(html, encoding="utf-8")
    return out_path
