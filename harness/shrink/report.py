"""shrink.html: the original and the minimal schedules on one time axis, each with its findings
and reproduction rate, and every candidate tried; a pure function of the record and the plans,
written again after every run, so an interrupted shrink still leaves a true page."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from harness.plan import Plan
from harness.shrink.candidates import Size, describe_unit, fault_units, size
from harness.shrink.search import rate, reproduces

HTML = "shrink.html"
_LEFT, _WIDTH, _ROW = 260, 640, 18
_COLOURS = {"valid": "#cfe8cf", "invalid": "#f4b6b6", "unknown": "#f6e3a1"}


def _axis_step(limit: float) -> float:
    for step in (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600):
        if limit / step <= 12:
            return float(step)
    return limit / 10


def _rows(plan: Plan) -> list[tuple[str, list[tuple[float, float | None]], str]]:
    """(label, spans, colour) per fault unit and per family: a span's end None is a point."""
    limit = float(plan.spec.get("time_limit") or 30.0)
    rows: list[tuple[str, list[tuple[float, float | None]], str]] = []
    for unit in fault_units(plan.faults):
        steps = [plan.faults[i] for i in unit]
        starts = [s.at_s for s in steps if s.action == "start"]
        stops = [s.at_s for s in steps if s.action == "stop"]
        spans: list[tuple[float, float | None]] = []
        for i, t in enumerate(starts):
            spans.append((t, stops[i] if i < len(stops) else limit))
        rows.append((describe_unit(plan.faults, unit), spans or [(stops[0], None)], "#e07b39"))
    for key, steps in plan.steps.items():
        rows.append((f"{key} steps", [(s.at_s, None) for s in steps], "#4a7fc1"))
    return rows


def timeline(plans: list[tuple[str, Plan]]) -> str:
    """One SVG: each plan's rows under its title, on one time axis."""
    horizon = max(float(p.spec.get("time_limit") or 30.0) for _, p in plans)
    x = lambda t: _LEFT + _WIDTH * t / horizon  # noqa: E731
    esc = html.escape
    body: list[str] = []
    y = 10
    for title, plan in plans:
        limit = float(plan.spec.get("time_limit") or 30.0)
        rows = _rows(plan)
        body.append(f"<text x='4' y='{y + 12}' font-weight='bold'>{esc(title)}</text>")
        top = y + _ROW
        for label, spans, colour in rows:
            y += _ROW
            body.append(f"<text x='12' y='{y + 12}'>{esc(label[:40])}</text>")
            for start, end in spans:
                if end is None:
                    body.append(
                        f"<circle cx='{x(start):.1f}' cy='{y + 8}' r='4' fill='{colour}'>"
                        f"<title>{esc(label)} at {start:g} s</title></circle>"
                    )
                else:
                    w = max(2.0, x(end) - x(start))
                    body.append(
                        f"<rect x='{x(start):.1f}' y='{y + 2}' width='{w:.1f}' height='12' "
                        f"fill='{colour}'><title>{esc(label)}: {start:g} s to {end:g} s"
                        "</title></rect>"
                    )
        y += _ROW
        body.append(
            f"<line x1='{x(limit):.1f}' y1='{top}' x2='{x(limit):.1f}' y2='{y}' "
            "stroke='#900' stroke-dasharray='4 3'><title>time limit</title></line>"
        )
        y += 10
    step = _axis_step(horizon)
    ticks = []
    t = 0.0
    while t <= horizon + 1e-9:
        ticks.append(
            f"<line x1='{x(t):.1f}' y1='10' x2='{x(t):.1f}' y2='{y}' stroke='#ddd'/>"
            f"<text x='{x(t):.1f}' y='{y + 14}' text-anchor='middle'>{t:g}</text>"
        )
        t += step
    height = y + 36
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{_LEFT + _WIDTH + 20}' "
        f"height='{height}' font-family='sans-serif' font-size='11'>"
        + "".join(ticks)
        + "".join(body)
        + f"<text x='{_LEFT + _WIDTH / 2}' y='{height - 2}' text-anchor='middle'>"
        "seconds into the run</text></svg>"
    )


def _runs_cell(runs: list[dict[str, Any]], kinds: set[str]) -> str:
    esc = html.escape
    out = []
    for r in runs:
        hit = reproduces(r, kinds)
        label = ("✗ " if hit else "· ") + r.get("status", "?")
        if r.get("kinds"):
            label += f" ({', '.join(r['kinds'])})"
        colour = _COLOURS.get(r.get("status", ""), "#e0b0f0")
        body = esc(label)
        if r.get("run_dir"):
            body = f"<a href='{esc(r['run_dir'])}/report.html'>{body}</a>"
        out.append(f"<span style='background:{colour};padding:1px 4px'>{body}</span>")
    return " ".join(out)


def _findings(runs: list[dict[str, Any]], kinds: set[str]) -> str:
    lines: list[str] = []
    for r in runs:
        if reproduces(r, kinds):
            lines += [s for s in r.get("summaries") or () if s not in lines]
    items = "".join(f"<li>{html.escape(s)}</li>" for s in lines[:8])
    return f"<ul>{items}</ul>" if items else "<p>(no finding recorded)</p>"


def shrink_html(
    record: dict[str, Any],
    original: Plan,
    best: Plan,
    original_findings: list[str],
) -> str:
    esc = html.escape
    kinds = set(record["kinds"])
    orig = record.get("original") or {"runs": []}
    k, n = rate(orig["runs"], kinds)
    best_id = record["best"]
    entries = {c["id"]: c for c in record["candidates"]}
    best_runs = entries[best_id]["runs"] if best_id in entries else orig["runs"]
    confirmed = record.get("confirmed") or {}
    conf_runs = confirmed.get("runs") if confirmed.get("of") == best_id else None
    before, after = size(original), size(best)
    rows = []
    for c in record["candidates"]:
        mark = " style='font-weight:bold'" if c["id"] in record["path"] else ""
        got = {True: "yes", False: "no", None: "not finished"}[c.get("reproduced")]
        if c.get("presumed"):
            got = f"no (presumed: no bigger than {esc(c['presumed'])}, not run)"
        rows.append(
            f"<tr{mark}><td>{esc(c['id'])}</td><td>{esc(c.get('parent', ''))}</td>"
            f"<td>{esc(c['move'])}</td><td>{esc(c['what'])}</td>"
            f"<td>{esc(str(_size_of(c)))}</td><td>{_runs_cell(c['runs'], kinds)}</td>"
            f"<td>{got}</td></tr>"
        )
    confirm = "no --confirm runs"
    if conf_runs is not None:
        ck, cn = rate(conf_runs, kinds)
        confirm = f"{ck} of {cn} --confirm runs ({_pct(ck, cn)}): {_runs_cell(conf_runs, kinds)}"
    findings = "".join(f"<li>{esc(s)}</li>" for s in original_findings[:8]) or "<li>(none)</li>"
    return "\n".join(
        [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>kchaos shrink of {esc(record['run_dir'])}</title>",
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #999;padding:3px 6px;text-align:left;font-size:13px}"
            "h1{font-size:20px;overflow-wrap:anywhere}"
            "</style></head><body>",
            f"<h1>Shrink of {esc(record['run_dir'])}</h1>",
            f"<p>status <b>{esc(record['status'])}</b>"
            + (f" ({esc(record['why'])})" if record.get("why") else "")
            + f"; {record['runs']} runs in {record.get('seconds', 0):.0f} s; "
            f"kinds sought: {esc(', '.join(sorted(kinds)))}; up to {record['tries']} tries "
            "a candidate (one reproduction is enough).</p>",
            "<h2>Schedules</h2>",
            timeline([(f"original: {before}", original), (f"minimal ({best_id}): {after}", best)]),
            "<h2>Original</h2>",
            f"<p>reproduced in {k} of {n} replays ({_pct(k, n)}): "
            f"{_runs_cell(orig['runs'], kinds)}</p>",
            f"<p>its findings:</p><ul>{findings}</ul>",
            f"<h2>Minimal plan ({esc(best_id)}, plan.min.json)</h2>",
            f"<p>in the search: reproduced in {rate(best_runs, kinds)[0]} of "
            f"{len(best_runs)} tries (its tries stop at the first reproduction); {confirm}</p>",
            "<p>its findings:</p>",
            _findings(best_runs + (conf_runs or []), kinds),
            f"<p>replay it: <code>kchaos run --replay {esc(str(Path('plan.min.json')))}</code></p>",
            "<h2>Candidates</h2>",
            "<table><tr><th>id</th><th>from</th><th>move</th><th>what</th><th>size</th>"
            "<th>runs</th><th>reproduced</th></tr>",
            *rows,
            "</table></body></html>",
        ]
    )


def _size_of(c: dict[str, Any]) -> str:
    s = dict(c["size"])
    s["rate"] = float("inf") if s.get("rate") is None else s["rate"]
    return str(Size(**s))


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f}%" if n else "no runs"
