"""What a campaign leaves for the morning: campaign.json, junit.xml, summary.txt, campaign.html.

Each is a pure function of the campaign record (``record``: what campaign.json holds), written
again after every cell, so a campaign killed in the night still leaves a valid report of what
ran. junit.xml follows the JUnit schema CI servers read (Jenkins xunit's junit-10.xsd): one
testsuite per scenario with the run directories as its properties, one testcase per run
(classname = the scenario), ``failure`` for an invalid run with the findings' one-line
summaries, ``error`` for a run that could not be judged (unknown, crashed, timed out). The
liveness verdict (docs/checkers.md, Liveness) is an outcome of its own: a run whose liveness
is ``hang`` gets a ``failure`` of type ``liveness`` when its run asked ``--liveness fail``, and
a ``system-err`` line saying so when it only reports it.
"""

from __future__ import annotations

import html
import os
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from history import strict_json

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
CRASHED, TIMEOUT, ERROR = "crashed", "timeout", "error"
PENDING, RUNNING, INTERRUPTED = "pending", "running", "interrupted"
FINAL = (VALID, INVALID, UNKNOWN, CRASHED, TIMEOUT, ERROR)
FAILING = (INVALID, UNKNOWN, CRASHED, TIMEOUT, ERROR)
COLOURS = {
    VALID: "#cfe8cf",
    INVALID: "#f4b6b6",
    UNKNOWN: "#f6e3a1",
    CRASHED: "#e0b0f0",
    TIMEOUT: "#e0b0f0",
    ERROR: "#d0d0d0",
    PENDING: "#ffffff",
    RUNNING: "#cde3f6",
    INTERRUPTED: "#eeeeee",
}


def exit_code(cells: list[dict[str, Any]]) -> int:
    """0 every cell valid, 1 any invalid, 2 any unknown, crashed, timed out or not run."""
    statuses = {c["status"] for c in cells}
    if INVALID in statuses:
        return 1
    if statuses - {VALID}:
        return 2
    return 0


def write_all(directory: Path, record: dict[str, Any]) -> None:
    record["counts"] = dict(Counter(c["status"] for c in record["cells"]))
    record["exit_code"] = exit_code(record["cells"])
    _atomic(directory / "campaign.json", strict_json.dumps(record, indent=1) + "\n")
    _atomic(directory / "junit.xml", junit_xml(record))
    _atomic(directory / "summary.txt", summary_text(record))
    _atomic(directory / "campaign.html", campaign_html(record))


def _atomic(path: Path, text: str) -> None:
    """Whole or not at all: a reader (a CI server, a person) never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _classname(scenario: str) -> str:
    # CI servers split a classname at its last dot into package and class: keep versions whole.
    return scenario.replace(".", "_")


def junit_xml(record: dict[str, Any]) -> str:
    root = ET.Element("testsuites", name=f"kchaos campaign {record['campaign']}")
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for cell in record["cells"]:
        by_scenario.setdefault(cell["scenario"], []).append(cell)
    totals = Counter()
    for scenario, cells in by_scenario.items():
        counted = [c for c in cells if c["status"] in FINAL]
        failures = sum(c["status"] == INVALID for c in counted)
        errors = sum(c["status"] in FAILING and c["status"] != INVALID for c in counted)
        skipped = len(cells) - len(counted)
        seconds = sum(c.get("seconds") or 0 for c in cells)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=scenario,
            tests=str(len(cells)),
            failures=str(failures),
            errors=str(errors),
            skipped=str(skipped),
            time=f"{seconds:.1f}",
            timestamp=record.get("started", ""),
        )
        props = ET.SubElement(suite, "properties")
        for cell in cells:
            if cell.get("run_dir"):
                ET.SubElement(
                    props, "property", name=f"run_dir {cell['id']}", value=cell["run_dir"]
                )
        for cell in cells:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=_classname(scenario),
                name=f"seed {cell['seed']} ({cell['id']})",
                time=f"{cell.get('seconds') or 0:.1f}",
            )
            hung = _outcome(case, cell)
            if cell.get("run_dir"):
                ET.SubElement(case, "system-out").text = f"run directory: {cell['run_dir']}\n"
            if hung:  # junit-10.xsd: system-err comes last
                ET.SubElement(case, "system-err").text = hung
        totals.update(tests=len(cells), failures=failures, errors=errors)
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


HANG = "hang"


def _outcome(case: ET.Element, cell: dict[str, Any]) -> str | None:
    """Adds the case's failure, error or skipped element; returns the liveness line for its
    system-err, if it has one."""
    status = cell["status"]
    lines = cell.get("summaries") or []
    rate = cell.get("reproduced")
    prefix = f"[seen in {rate} runs of this seed] " if rate else ""
    said = None
    if cell.get("liveness") == HANG:
        hung = cell.get("liveness_summaries") or []
        message = prefix + "liveness hang: " + ("; ".join(hung[:3]) or "see results.json")
        only = set(cell.get("findings") or []) <= set(cell.get("liveness_kinds") or [])
        if cell.get("liveness_fails_run") and status == INVALID and only:
            # Invalid for its liveness alone: one failure, of its own type.
            ET.SubElement(case, "failure", type="liveness", message=message).text = "\n".join(hung)
            return None
        said = message + ("\n" if cell.get("liveness_fails_run") else " (reported, not failing)\n")
    if status == INVALID:
        message = prefix + ("; ".join(lines[:3]) or "invalid")
        ET.SubElement(case, "failure", type="invalid", message=message).text = "\n".join(lines)
    elif status in FAILING:
        why = cell.get("why") or status
        ET.SubElement(case, "error", type=status, message=prefix + why).text = "\n".join(
            [why, *lines]
        )
    elif status not in FINAL:
        ET.SubElement(case, "skipped", message=f"not run ({status})")
    if cell.get("not_exercised"):
        missing = ", ".join(cell["not_exercised"])
        said = (said or "") + f"not exercised: the run did not reach {missing} (--must-reach)\n"
    return said


def summary_text(record: dict[str, Any]) -> str:
    cells = record["cells"]
    counts = Counter(c["status"] for c in cells)
    lines = [
        f"campaign {record['campaign']} started {record.get('started')}: {len(cells)} cells; "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
    ]
    overheads = [c["overhead_s"] for c in cells if c.get("overhead_s") is not None]
    if overheads:
        lines.append(
            f"per-cell overhead beyond the time limit: median {_median(overheads):.0f} s, "
            f"max {max(overheads):.0f} s"
        )
    for c in cells:
        extra = f" [{c['reproduced']}]" if c.get("reproduced") else ""
        lines.append(f"  {c['status']:>11}  {c['scenario']}  seed {c['seed']}{extra}")
        lines += [f"               - {s}" for s in (c.get("summaries") or [])[:3]]
        if c.get("shrink"):
            where = c["shrink"].get("html", "no shrink.html")
            lines.append(f"               shrink {c['shrink'].get('status')}: {where}")
        if c.get("why") and c["status"] != INVALID:
            lines.append(f"               ({c['why']})")
    return "\n".join(lines) + "\n"


def _median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _shrunk(cell: dict[str, Any]) -> str:
    """The link to a failing cell's shrink (kchaos campaign --shrink-failures), with what the
    smallest plan kept."""
    shrink = cell.get("shrink")
    if not shrink:
        return ""
    size = shrink.get("size") or {}
    kept = f": {size['faults']} fault(s), {size['time_limit']:g} s" if size else ""
    label = html.escape(f"shrink {shrink.get('status')}{kept}")
    link = shrink.get("html")
    return f"<br><small>{f'<a href={html.escape(link)!r}>{label}</a>' if link else label}</small>"


def campaign_html(record: dict[str, Any]) -> str:
    """The matrix of verdicts: a row per scenario, a column per seed, each linking its report."""
    cells = record["cells"]
    seeds = sorted({c["seed"] for c in cells})
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    for c in cells:
        rows.setdefault(c["scenario"], {})[c["seed"]] = c
    counts = Counter(c["status"] for c in cells)
    esc = html.escape
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>kchaos campaign {esc(record['campaign'])}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:4px 8px;text-align:left}"
        "td.v a{color:#000}.legend span{padding:2px 8px;margin-right:6px}</style>",
        "</head><body>",
        f"<h1>Campaign {esc(record['campaign'])}</h1>",
        f"<p>started {esc(str(record.get('started')))}, "
        f"finished {esc(str(record.get('finished') or 'not yet'))}; "
        + ", ".join(f"{n} {esc(s)}" for s, n in sorted(counts.items()))
        + f"; exit code {record.get('exit_code')}</p>",
        "<p class='legend'>"
        + "".join(f"<span style='background:{COLOURS[s]}'>{s}</span>" for s in COLOURS)
        + "</p>",
        "<table><tr><th>scenario</th>" + "".join(f"<th>seed {s}</th>" for s in seeds) + "</tr>",
    ]
    for scenario, by_seed in rows.items():
        out.append(f"<tr><td>{esc(scenario)}</td>")
        for seed in seeds:
            c = by_seed.get(seed)
            if c is None:
                out.append("<td></td>")
                continue
            label = c["status"] + (f" ({c['reproduced']})" if c.get("reproduced") else "")
            title = "; ".join(c.get("summaries") or []) or c.get("why") or ""
            report = c.get("report")
            body = f"<a href='{esc(report)}'>{esc(label)}</a>" if report else esc(label)
            secs = f"<br><small>{c['seconds']:.0f} s</small>" if c.get("seconds") else ""
            if c.get("liveness") == HANG:
                secs += "<br><small><b>liveness hang</b></small>"
            if c.get("not_exercised"):
                secs += "<br><small><i>not exercised</i></small>"
            out.append(
                f"<td class='v' style='background:{COLOURS.get(c['status'], '#fff')}' "
                f"title='{esc(title)}'>{body}{secs}{_shrunk(c)}</td>"
            )
        out.append("</tr>")
    out.append("</table>")
    out += _coverage_table(rows)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _coverage_table(rows: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """Per scenario, each interesting state (checkers/core/states.py): how many of its runs
    reached it and how often in all (docs/checkers.md, Coverage)."""
    reached: dict[str, dict[str, tuple[int, int]]] = {}
    states: list[str] = []
    for scenario, by_seed in rows.items():
        for c in by_seed.values():
            for state, n in (c.get("coverage") or {}).items():
                if state not in states:
                    states.append(state)
                runs, total = reached.setdefault(scenario, {}).get(state, (0, 0))
                reached[scenario][state] = (runs + (n > 0), total + n)
    if not states:
        return []
    esc = html.escape
    out = [
        "<h2>Coverage</h2><p>Per scenario, the runs that reached each state / the times in all"
        " (docs/checkers.md, Coverage); empty: no run measured it.</p>",
        "<table><tr><th>scenario</th>" + "".join(f"<th>{esc(s)}</th>" for s in states) + "</tr>",
    ]
    for scenario, got in reached.items():
        cells = "".join(
            f"<td>{got[s][0]} / {got[s][1]}</td>" if s in got else "<td></td>" for s in states
        )
        out.append(f"<tr><td>{esc(scenario)}</td>{cells}</tr>")
    out.append("</table>")
    return out
