"""Trends across nights from the one-row-per-run frame (report.runs_frame): each scenario's
verdict per night, pass rate over its last N runs, flaky scenarios, the first failing Kafka
version, and finding kinds per night. Plain pandas: a run is one row, so even a year of nights
is a few thousand rows; Spark reads the histories (spark_stats.py)."""

from __future__ import annotations

import re

import pandas as pd

PASS = "valid"


def version_key(version: str) -> tuple[int, ...]:
    """3.10.0 after 3.9.2; a release that is not numbers sorts last."""
    parts = re.findall(r"\d+", version or "")
    return tuple(int(p) for p in parts) if parts else (10**9,)


def _summary(statuses: pd.Series) -> str:
    """A cell: the verdicts of a scenario's runs that night, worst first ("1 invalid, 2 valid")."""
    order = ["invalid", "crashed", "unknown", "not checked", "valid"]
    counts = statuses.value_counts()
    if len(counts) == 1:
        return str(counts.index[0]) + ("" if counts.iloc[0] == 1 else f" ×{counts.iloc[0]}")
    return ", ".join(f"{int(counts[s])} {s}" for s in order if s in counts)


def verdict_by_night(df: pd.DataFrame) -> pd.DataFrame:
    """Long form: scenario, night, runs, and the verdicts' summary."""
    if df.empty:
        return pd.DataFrame(columns=["scenario", "night", "runs", "valid", "verdicts"])
    g = df.groupby(["scenario", "night"])
    return g.agg(
        runs=("path", "size"),
        valid=("status", lambda s: int((s == PASS).sum())),
        verdicts=("status", _summary),
    ).reset_index()


def pass_rate(df: pd.DataFrame, last: int) -> pd.DataFrame:
    """Per scenario, its last `last` runs (by night, then start): how many passed (valid)."""
    cols = ["scenario", "runs", "valid", "invalid", "crashed", "other", "pass_rate", "last_night"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    ordered = df.sort_values(["night", "started", "path"])
    for name, g in ordered.groupby("scenario"):
        tail = g.tail(last)
        s = tail["status"]
        rows.append(
            {
                "scenario": name,
                "runs": len(tail),
                "valid": int((s == PASS).sum()),
                "invalid": int((s == "invalid").sum()),
                "crashed": int((s == "crashed").sum()),
                "other": int((~s.isin([PASS, "invalid", "crashed"])).sum()),
                "pass_rate": float((s == PASS).mean()),
                "last_night": tail["night"].iloc[-1],
            }
        )
    return pd.DataFrame(rows, columns=cols).sort_values(["pass_rate", "scenario"])


def flaky(df: pd.DataFrame) -> pd.DataFrame:
    """Scenarios with both valid and invalid runs on the same Kafka release that ran."""
    cols = ["scenario", "version", "valid", "invalid", "kinds"]
    known = df[df["version"] != ""] if not df.empty else df
    rows = []
    if not known.empty:
        for (name, version), g in known.groupby(["scenario", "version"]):
            valid, invalid = int((g["status"] == PASS).sum()), int((g["status"] == "invalid").sum())
            if valid and invalid:
                kinds = sorted({k for ks in g["kind_list"] for k in ks})
                rows.append(
                    {
                        "scenario": name,
                        "version": version,
                        "valid": valid,
                        "invalid": invalid,
                        "kinds": ", ".join(kinds),
                    }
                )
    return pd.DataFrame(rows, columns=cols)


def first_failing(df: pd.DataFrame) -> pd.DataFrame:
    """Per scenario with an invalid run: the lowest Kafka release that ran with an invalid
    verdict, the releases below it that only passed, and its first invalid run."""
    cols = ["scenario", "first_failing", "passing_below", "all_versions", "first_run"]
    rows = []
    known = df[df["version"] != ""] if not df.empty else df
    if not known.empty:
        for name, g in known.groupby("scenario"):
            bad = g[g["status"] == "invalid"]
            if bad.empty:
                continue
            versions = sorted(set(g["version"]), key=version_key)
            first = min(set(bad["version"]), key=version_key)
            passed = set(g[g["status"] == PASS]["version"])
            below = [v for v in versions if version_key(v) < version_key(first) and v in passed]
            run = bad[bad["version"] == first].sort_values(["night", "path"]).iloc[0]
            rows.append(
                {
                    "scenario": name,
                    "first_failing": first,
                    "passing_below": ", ".join(below),
                    "all_versions": ", ".join(versions),
                    "first_run": run["path"],
                }
            )
    return pd.DataFrame(rows, columns=cols)


def kinds_by_night(df: pd.DataFrame) -> pd.DataFrame:
    """Long form: night, finding kind, failing findings, runs with it."""
    cols = ["night", "kind", "findings", "runs"]
    rows = [
        {"night": r.night, "kind": k, "findings": n}
        for r in df.itertuples()
        for k, n in r.failing_by_kind.items()
    ]
    if not rows:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame(rows).groupby(["night", "kind"])
    return out.agg(findings=("findings", "sum"), runs=("findings", "size")).reset_index()
