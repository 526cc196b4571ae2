"""The cross-run report: trends across nights (each scenario's verdict per night, pass rate over
its last runs, flaky scenarios, the first failing Kafka version, finding kinds over time), runs
by workload, nemesis and Kafka version, and the worst runs linked to their own report.html; the
same tables as Parquet in analysis/ beside analysis.html."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from checkers.analyze import plots, trends
from checkers.analyze.runs import RunInfo, find_runs
from checkers.analyze.scenario import ScenarioTerms
from checkers.analyze.spark_stats import op_stats

ANALYSIS_NAME = "analysis.html"
PARQUET_DIR = "analysis"
WORST = 20
DEFAULT_LAST = 10

TEMPLATE = jinja2.Environment(autoescape=True).from_string(
    """<!doctype html>
<html><head><meta charset="utf-8"><title>kchaos analysis: {{ root }}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; max-width: 1300px; }
table { border-collapse: collapse; margin: 0.3em 0 1.2em; }
td, th { border: 1px solid #ccc; padding: 2px 8px; font-size: 13px; text-align: left; }
td.bad, span.bad { color: #c0392b; font-weight: bold; }
td.crashed { color: #8e44ad; font-weight: bold; }
td.good { color: #2e8b57; }
.plot svg { max-width: 100%; height: auto; }
p.note { color: #555; }
</style></head><body>
<h1>kchaos analysis</h1>
<p><code>{{ root }}</code>: {{ n_runs }} runs, {{ n_invalid }} invalid, {{ n_unknown }} unknown,
{{ n_crashed }} crashed, {{ n_unchecked }} not checked, {{ n_ops }} client operations,
over {{ n_nights }} night{{ '' if n_nights == 1 else 's' }} and {{ n_scenarios }}
scenario{{ '' if n_scenarios == 1 else 's' }}.</p>
<p class="note">A scenario is a run without its seed: workload/topology/requested
version/requested faults[/other options]. A night is its campaign's timestamp, or a run's own
start outside a campaign. Kafka version is the release that ran (run.json). The tables are also
in <code>{{ parquet_dir }}/*.parquet</code>.</p>

<h2>Trends across nights</h2>
{% if plot_verdicts %}<div class="plot">{{ plot_verdicts | safe }}</div>{% endif %}
<h3>Each scenario's verdict per night</h3>
{% if plot_matrix %}<div class="plot">{{ plot_matrix | safe }}</div>{% endif %}
{{ by_night | safe }}
<h3>Pass rate over each scenario's last {{ last }} runs</h3>
{{ pass_rate | safe }}
<h3>Flaky scenarios (valid and invalid on the same Kafka version)</h3>
{{ flaky | safe }}
<h3>First failing Kafka version per scenario</h3>
{{ first_failing | safe }}
<h3>Finding kinds over time</h3>
{% if plot_kinds %}<div class="plot">{{ plot_kinds | safe }}</div>{% endif %}
{{ kinds_time | safe }}

{% for title, table in groups %}<h2>By {{ title }}</h2>{{ table | safe }}{% endfor %}
<h2>Anomaly kinds by faults that ran</h2>{{ kinds | safe }}
<h2>Liveness and coverage by scenario</h2>{{ coverage | safe }}
<h2>Worst runs</h2>
<table><tr><th>Run</th><th>Verdict</th><th>Failing findings</th><th>Kinds</th>
<th>Scenario</th><th>Faults that ran</th><th>Kafka version</th><th>Client ops ok/fail/info</th>
</tr>
{% for r in worst %}<tr><td>{% if r.link %}<a href="{{ r.link }}">{{ r.name }}</a>{% else %}
{{ r.name }}{% endif %}</td><td class="{{ r.css }}">{{ r.status }}</td><td>{{ r.failing }}</td>
<td>{{ r.kinds }}</td><td>{{ r.scenario }}</td><td>{{ r.nemesis }}</td><td>{{ r.version }}</td>
<td>{{ r.ops }}</td></tr>{% endfor %}
</table></body></html>
"""
)

# Column names as a reader sees them (the Parquet files keep the short ones).
HEADERS = {
    "scenario": "Scenario",
    "night": "Night",
    "runs": "Runs",
    "valid": "Valid",
    "invalid": "Invalid",
    "unknown": "Unknown",
    "crashed": "Crashed",
    "unchecked": "Not checked",
    "other": "Unknown or not checked",
    "verdicts": "Verdicts",
    "pass_rate": "Pass rate",
    "last_night": "Last night",
    "version": "Kafka version",
    "kinds": "Finding kinds",
    "kind": "Finding kind",
    "findings": "Failing findings",
    "first_failing": "First failing version",
    "passing_below": "Passing on lower versions",
    "all_versions": "Versions that ran",
    "first_run": "First invalid run",
    "failing": "Failing findings",
    "ok": "Client ops ok",
    "info": "Client ops info (indeterminate)",
    "invalid_share": "Share invalid",
    "workload": "Workload",
    "nemesis": "Faults that ran",
}


def _night_text(t: Any) -> str:
    return t.strftime("%Y-%m-%d %H:%M") if t is not None else "?"


def runs_frame(runs: list[RunInfo], stats: pd.DataFrame) -> pd.DataFrame:
    """One row per run, with its op counts from Spark (0 for a run without history.parquet)."""
    df = pd.DataFrame(
        [
            {
                "path": str(r.path.resolve()),
                "scenario": r.scenario,
                "campaign": r.campaign,
                "night": _night_text(r.night),
                "started": _night_text(r.started),
                "workload": r.workload,
                "nemesis": r.nemesis,
                "requested_nemesis": r.requested_nemesis,
                "version": r.version,
                "requested_version": r.requested_version,
                "version_shown": r.version or f"? (asked {r.requested_version or '?'})",
                "date": r.started.date().isoformat() if r.started else "?",
                "status": r.status,
                "checked": r.checked,
                "crashed": r.crashed,
                "failing": r.n_failing,
                "kinds": ", ".join(f"{k} ({n})" for k, n in sorted(r.failing.items())),
                "kind_list": sorted(r.failing),
                "failing_by_kind": dict(r.failing),
                "has_report": r.has_report,
                "liveness": r.liveness,
            }
            for r in runs
        ]
    )
    if df.empty:
        return df
    df = df.merge(stats, on="path", how="left")
    for column in ("ok", "fail", "info", "faults", "seconds"):
        # Object-typed when Spark read no history: numbers, 0 for a run without one.
        df[column] = pd.to_numeric(df[column]).fillna(0)
    return df


def _table(df: pd.DataFrame, empty: str) -> str:
    if df.empty:
        return f"<p>{empty}</p>"
    return df.rename(columns=HEADERS).to_html(index=False, border=0)


def _by(df: pd.DataFrame, column: str) -> str:
    g = df.groupby(column).agg(
        runs=("path", "size"),
        invalid=("status", lambda s: int((s == "invalid").sum())),
        unknown=("status", lambda s: int((s == "unknown").sum())),
        crashed=("status", lambda s: int((s == "crashed").sum())),
        unchecked=("status", lambda s: int((s == "not checked").sum())),
        failing=("failing", "sum"),
        ok=("ok", "sum"),
        info=("info", "sum"),
    )
    g["invalid_share"] = (g["invalid"] / g["runs"]).map("{:.0%}".format)
    g = g.reset_index()
    g[["ok", "info"]] = g[["ok", "info"]].astype(int)
    label = {"version_shown": "Kafka version (ran)", "date": "Date"}.get(column)
    return _table(g.rename(columns={column: label} if label else {}), "No runs.")


def _kinds(runs: list[RunInfo]) -> str:
    rows = [{"kind": k, "nemesis": r.nemesis, "n": n} for r in runs for k, n in r.failing.items()]
    if not rows:
        return "<p>No failing findings in any run.</p>"
    table = pd.DataFrame(rows).pivot_table(
        index="kind", columns="nemesis", values="n", aggfunc="sum", fill_value=0
    )
    table.index.name, table.columns.name = "Finding kind", "Faults that ran"
    return table.to_html(border=0)


def _coverage(runs: list[RunInfo]) -> str:
    """Per scenario: its runs, those whose liveness verdict is hang, and for each state of
    checkers/core/states.py the runs that reached it (docs/checkers.md, Coverage)."""
    rows = []
    for r in runs:
        row: dict[str, Any] = {
            "scenario": r.scenario,
            "runs": 1,
            "liveness hang": r.liveness == "hang",
        }
        row.update({state: int(n > 0) for state, n in r.coverage.items()})
        rows.append(row)
    if not rows or not any(r.liveness or r.coverage for r in runs):
        return "<p>No run has a liveness verdict or coverage counts.</p>"
    table = pd.DataFrame(rows).groupby("scenario").sum(numeric_only=True).reset_index()
    return _table(table, "No runs.")


def _rel(path: str, base: Path) -> str:
    return os.path.relpath(path, base.resolve())


def analyze(
    root: str | Path,
    spark: Any,
    out: str | Path | None = None,
    last: int = DEFAULT_LAST,
    progress: Callable[[str], None] | None = None,
    runs: list[RunInfo] | None = None,
    terms: ScenarioTerms | None = None,
) -> Path:
    """Writes `analysis.html` (default: in `root`) and analysis/*.parquet beside it; returns the
    HTML's path. `progress` hears each step; `runs` saves finding them again, else they are
    found with the scenario `terms` (checkers/analyze/scenario.py)."""
    say = progress or (lambda _text: None)
    root = Path(root)
    out_path = Path(out) if out else root / ANALYSIS_NAME
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if runs is None:
        if terms is None:
            raise ValueError("analyze: give the runs, or the scenario terms to find them with")
        say("finding runs")
        runs = find_runs(root, terms)
    parquets = [r.path / "history.parquet" for r in runs if (r.path / "history.parquet").exists()]
    say(f"reading {len(parquets)} histories with Spark")
    stats = op_stats(spark, parquets)
    say("computing trends")
    df = runs_frame(runs, stats)
    by_night = trends.verdict_by_night(df)
    rates = trends.pass_rate(df, last)
    flaky = trends.flaky(df)
    first = trends.first_failing(df)
    kinds_time = trends.kinds_by_night(df)

    say("writing Parquet")
    pq_dir = out_path.parent / PARQUET_DIR
    pq_dir.mkdir(exist_ok=True)
    tables = {
        "runs": df.drop(columns=["failing_by_kind", "version_shown"], errors="ignore"),
        "verdict_by_night": by_night,
        "pass_rate": rates,
        "flaky": flaky,
        "first_failing": first,
        "kinds_by_night": kinds_time,
    }
    for name, table in tables.items():
        table.to_parquet(pq_dir / f"{name}.parquet", index=False)

    say("drawing plots")
    base = out_path.parent
    plot_verdicts = plots.verdicts_per_night(df) if not df.empty else ""
    plot_matrix = plots.scenario_matrix(by_night) if not by_night.empty else ""
    plot_kinds = plots.kinds_per_night(kinds_time) if not kinds_time.empty else ""

    night_matrix = (
        by_night.pivot(index="scenario", columns="night", values="verdicts").fillna("")
        if not by_night.empty
        else pd.DataFrame()
    )
    if not night_matrix.empty:
        night_matrix = night_matrix.reset_index()
        night_matrix.columns.name = None
    rates_shown = rates.assign(pass_rate=rates["pass_rate"].map("{:.0%}".format))
    first_shown = first.assign(first_run=first["first_run"].map(lambda p: _rel(p, base)))

    worst: list[dict[str, Any]] = []
    if not df.empty:
        rank = {"invalid": 0, "crashed": 1, "unknown": 2, "not checked": 3}
        ranked = df.assign(rank=df["status"].map(rank).fillna(4))
        for _, r in (
            ranked.sort_values(["rank", "failing"], ascending=[True, False]).head(WORST).iterrows()
        ):
            status = r["status"]
            if r["crashed"] and status != "crashed":
                status = f"{status} (client host crashed: {r['crashed']})"
            elif r["crashed"]:
                status = f"crashed: {r['crashed']}"
            worst.append(
                {
                    "name": _rel(r["path"], base),
                    "link": _rel(str(Path(r["path"]) / "report.html"), base)
                    if r["has_report"]
                    else None,
                    "status": status,
                    "css": {"invalid": "bad", "crashed": "crashed", "valid": "good"}.get(
                        r["status"], ""
                    ),
                    "failing": r["failing"],
                    "kinds": r["kinds"],
                    "scenario": r["scenario"],
                    "nemesis": r["nemesis"],
                    "version": r["version_shown"],
                    "ops": f"{int(r['ok'])}/{int(r['fail'])}/{int(r['info'])}",
                }
            )
    count = (lambda s: int((df["status"] == s).sum())) if not df.empty else (lambda s: 0)
    html = TEMPLATE.render(
        root=str(root),
        parquet_dir=PARQUET_DIR,
        n_runs=len(df),
        n_invalid=count("invalid"),
        n_unknown=count("unknown"),
        n_crashed=count("crashed"),
        n_unchecked=count("not checked"),
        n_ops=int(df[["ok", "fail", "info"]].to_numpy().sum()) if not df.empty else 0,
        n_nights=df["night"].nunique() if not df.empty else 0,
        n_scenarios=df["scenario"].nunique() if not df.empty else 0,
        last=last,
        plot_verdicts=plot_verdicts,
        plot_matrix=plot_matrix,
        plot_kinds=plot_kinds,
        by_night=_table(night_matrix, "No runs."),
        pass_rate=_table(rates_shown, "No runs."),
        flaky=_table(flaky, "No scenario has both verdicts on one Kafka version."),
        first_failing=_table(first_shown, "No scenario has an invalid run."),
        kinds_time=_table(kinds_time, "No failing findings in any run."),
        groups=[
            (title, _by(df, c))
            for title, c in (
                ("scenario", "scenario"),
                ("workload", "workload"),
                ("nemesis (the faults that ran)", "nemesis"),
                ("version (the Kafka release that ran)", "version_shown"),
                ("date", "date"),
            )
        ]
        if not df.empty
        else [],
        kinds=_kinds(runs),
        coverage=_coverage(runs),
        worst=worst,
    )
    out_path.write_text(html, encoding="utf-8")
    return out_path
