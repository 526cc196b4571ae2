"""`report.html` of one checked run, written beside results.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from checkers.core.findings import Finding
from checkers.core.verdict import Verdict
from checkers.report import plots
from checkers.report.data import LAT_RATIO, load
from checkers.report.share import load_share
from history.columnar import op_rows_at

REPORT_NAME = "report.html"
# Findings shown in full per kind; the rest are counted (results.json has them all).
SHOWN_PER_KIND = 50
VALUE_CHARS = 300

# Autoescape: explanations quote record text and op values, which may hold "<" or "&".
TEMPLATE = jinja2.Environment(autoescape=True).from_string(
    """<!doctype html>
<html><head><meta charset="utf-8"><title>kchaos {{ status }}: {{ history }}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; max-width: 1200px; }
.status { font-weight: bold; padding: 0.1em 0.5em; border-radius: 4px; color: white; }
.status.valid { background: #4c9a2a; } .status.invalid { background: #c0392b; }
.status.unknown { background: #888; }
.status.live { background: #4c9a2a; } .status.hang { background: #d35400; }
.status.not-judged { background: #888; }
table { border-collapse: collapse; margin: 0.3em 0 1em; } td, th { border: 1px solid #ccc;
padding: 2px 6px; font-size: 12px; vertical-align: top; } code { font-size: 12px; }
.finding { border-left: 4px solid #c0392b; padding-left: 0.8em; margin: 1em 0; }
.finding.tolerated, .finding.unknown { border-color: #aaa; }
img { max-width: 100%; }
</style></head><body>
<h1>kchaos run <span class="status {{ status }}">{{ status | upper }}</span>{% if liveness %}
<span class="status {{ liveness.status | replace(" ", "-") }}">LIVENESS {{ liveness.status | upper
}}</span>{% endif %}</h1>
<p><code>{{ history }}</code> · {{ n_ops }} client operations · {{ faults | length }} fault
periods · engine {{ engine }}</p>
<h2>Counts</h2>
{% if counts %}<table><tr><th>kind</th><th>failing</th><th>tolerated</th><th>unknown</th></tr>
{% for kind, c in counts.items() %}<tr><td><a href="#{{ kind }}">{{ kind }}</a></td>
<td>{{ c.get("failing", "") }}</td><td>{{ c.get("tolerated", "") }}</td>
<td>{{ c.get("unknown", "") }}</td></tr>{% endfor %}
</table>{% else %}<p>No findings of any kind.</p>{% endif %}
{% for n in notes %}<p>note: {{ n }}</p>{% endfor %}
{% if liveness %}<h2>Liveness</h2>
<p>A result class of its own (docs/checkers.md, Liveness): <b>{{ liveness.status }}</b>;
{{ "its findings fail the run (--liveness fail)" if liveness.fails_run else
"its findings are reported, tolerated (--liveness fail makes them fail the run)" }}. Judged:
{{ liveness.judged | join(", ") or "nothing" }}.</p>
{% if liveness.counts %}<table><tr><th>kind</th><th>findings</th></tr>
{% for kind, n in liveness.counts.items() %}<tr><td><a href="#{{ kind }}">{{ kind }}</a></td>
<td>{{ n }}</td></tr>{% endfor %}</table>{% endif %}
{% if liveness.recovery.by_type %}<p>Recovery: for each operation type, from the last op that
ended a fault while the type was asked to its first ok after it:</p>
<table><tr><th>operation</th><th>after op</th><th>at (s)</th><th>seconds to its first ok</th></tr>
{% for f, r in liveness.recovery.by_type.items() %}<tr><td>{{ f }}</td><td>{{ r.after_op }}</td>
<td>{{ r.after_s }}</td><td>{{ "never" if r.seconds is none else r.seconds }}</td></tr>
{% endfor %}</table>{% endif %}
<p>Bounds (seconds): {% for k, v in liveness.bounds.items() %}{{ k }} {{ v }}{{ "; " if not
loop.last }}{% endfor %}.</p>{% endif %}
{% if coverage %}<h2>Coverage</h2>
<p>The interesting states this run reached (checkers/core/states.py; docs/checkers.md,
Coverage):</p>
<table><tr><th>state</th><th>times</th></tr>
{% for s, n in coverage.states.items() %}<tr><td>{{ s }}</td><td>{{ n }}</td></tr>{% endfor %}
{% for s, why in coverage.unmeasured.items() %}<tr><td>{{ s }}</td><td>not measured: {{ why
}}</td></tr>{% endfor %}</table>{% endif %}
<h2>Timeline</h2><img alt="timeline" src="data:image/png;base64,{{ timeline }}">
<p>{{ "Aggregated: each cell is the worst outcome of the ops that ended in it." if binned
else "One line per operation, from invocation to completion." }}</p>
<h2>Latency and throughput</h2>
<img alt="latency and throughput" src="data:image/png;base64,{{ rates }}">
<p>{{ "Aggregated: " if binned else "" }}latency quantiles of ok ops per time bin by
invocation (p50 and p95 within {{ lat_pct }} %, the maximum exact), completions per second
by completion.</p>
{% if by_f %}<table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th><th>ok p50 (ms)</th>
<th>ok p95 (ms)</th><th>ok p99 (ms)</th><th>ok max (ms)</th></tr>
{% for r in by_f %}<tr><td>{{ r.f }}</td><td>{{ r.ok }}</td><td>{{ r.fail }}</td>
<td>{{ r.info }}</td>{% for q in ("p50", "p95", "p99", "max") %}<td>{{ ms(r[q]) }}</td>
{% endfor %}</tr>{% endfor %}</table>{% endif %}
{% if faults %}<p>Shaded: fault periods, from a start-* invocation to the completion of the
stop-* or heal that ended it.</p>
{% endif %}
{% if quorum %}<h2>Controller quorum (observer samples)</h2>
<img alt="leaders and epochs" src="data:image/png;base64,{{ quorum }}">
{% if not raft %}<p>ZooKeeper mode: each broker's ActiveControllerCount; controller epochs are
judged from the brokers' logs (notes above).</p>{% endif %}{% endif %}
{% if elr %}<h2>Partitions: ISR and ELR (KIP-966)</h2>
<p>{{ elr.summary }}</p>
{% if elr.committed %}<p>Committed partition records of the partitions that ever had an ELR, a
last known ELR or no leader (the state after each record):</p>
<table><tr><th>offset</th><th>record</th><th>partition</th><th>leader (epoch)</th><th>ISR</th>
<th>ELR</th><th>last known ELR</th></tr>
{% for r in elr.committed %}<tr><td>{{ r.offset }}</td><td>{{ r.record }}</td>
<td>{{ r.topic }}-{{ r.partition }}</td><td>{{ r.leader }} ({{ r.leader_epoch }})</td>
<td>{{ r.isr }}</td><td>{{ r.elr }}</td><td>{{ r.last_known_elr }}</td></tr>{% endfor %}
</table>{% endif %}
{% if elr.sampled %}<p>Brokers' DescribeTopicPartitions answers showing an ELR or a last known
ELR (each broker's view whenever it changed):</p>
<table><tr><th>time (s)</th><th>op</th><th>broker</th><th>partition</th><th>leader (epoch)</th>
<th>ISR</th><th>ELR</th><th>last known ELR</th></tr>
{% for r in elr.sampled %}<tr><td>{{ "%.3f" % r.time_s }}</td><td>{{ r.op }}</td>
<td>{{ r.broker }}</td><td>{{ r.topic }}-{{ r.partition }}</td>
<td>{{ r.leader }} ({{ r.leader_epoch }})</td><td>{{ r.isr }}</td><td>{{ r.elr }}</td>
<td>{{ r.last_known_elr }}</td></tr>{% endfor %}</table>{% endif %}{% endif %}
{% if share %}{% set n = share.numbers %}<h2 id="share">Share group (KIP-932)</h2>
<p>{{ n.deliveries }} deliveries of {{ n.records }} records to the share consumers (the final
drain's included): {{ n.redeliveries }} redeliveries ({{ n.counted_above_one }} handed with a
delivery count above 1); lock {{ n.lock_ms }} ms, delivery count limit {{ n.limit }}.</p>
<table><tr><th>records</th><th>count</th></tr>
<tr><td>reached the delivery limit ({{ n.limit }})</td><td>{{ n.reached_limit }}</td></tr>
<tr><td>archived at the limit: handed at it and no ACCEPT sent after (released, rejected or
left to expire there)</td><td>{{ n.archived_at_limit }}</td></tr>
<tr><td>rejected (a REJECT sent)</td><td>{{ n.rejected_records }}</td></tr>
<tr><td>held past their lock on purpose (acknowledged late)</td><td>{{ n.held }}</td></tr>
<tr><td>late acknowledgements refused, the lock expired (InvalidRecordStateException)</td>
<td>{{ n.lock_expired_refusals }}</td></tr></table>
<p>Deliveries per record: records by the highest delivery count they were handed with.</p>
<table><tr>{% for c in n.counts %}<th>{{ c.count }}</th>{% endfor %}</tr>
<tr>{% for c in n.counts %}<td>{{ c.records }}</td>{% endfor %}</tr></table>
<p>Redeliveries by what came just before for the record: an acknowledgement sent (its type),
or nothing since its previous delivery (its lock expired, or its consumer closed or was cut
off).</p>
<table><tr>{% for k in n.after %}<th>{{ k }}</th>{% endfor %}</tr>
<tr>{% for v in n.after.values() %}<td>{{ v }}</td>{% endfor %}</tr></table>
{% if n.outcomes %}<p>Acknowledgement outcomes heard:
{% for k, v in n.outcomes.items() %}{{ k }} {{ v }}{{ ", " if not loop.last }}{% endfor %}.</p>
{% endif %}
<img alt="deliveries per consumer" src="data:image/png;base64,{{ share_plot }}">
<table><tr><th>consumer</th><th>deliveries</th><th>redelivered to it</th><th>accept</th>
<th>release</th><th>reject</th><th>renew</th><th>refused</th></tr>
{% for c in n.consumers %}<tr><td>{{ c.process }}</td><td>{{ c.deliveries }}</td>
<td>{{ c.redelivered }}</td><td>{{ c.accept }}</td><td>{{ c.release }}</td><td>{{ c.reject }}</td>
<td>{{ c.renew }}</td><td>{{ c.refused }}</td></tr>{% endfor %}</table>{% endif %}
<h2>Faults</h2>
{% if faults %}<table><tr><th>fault</th><th>from (s)</th><th>to (s)</th><th>ops</th></tr>
{% for f in faults %}<tr><td>{{ f.name }}</td><td>{{ "%.3f" % f.start_s }}</td>
<td>{{ "%.3f" % f.end_s }}</td><td>{{ f.start_index }}–{{ f.end_index if f.end_index is not none
else "end" }}</td></tr>{% endfor %}</table>{% else %}<p>No faults in this history.</p>{% endif %}
{% if migration %}<h2>Migration steps</h2>
<table><tr><th>step</th><th>from (s)</th><th>to (s)</th><th>ops</th></tr>
{% for f in migration %}<tr><td>{{ f.name }}</td><td>{{ "%.3f" % f.start_s }}</td>
<td>{{ "%.3f" % f.end_s }}</td><td>{{ f.start_index }}–{{ f.end_index if f.end_index is not none
else "end" }}</td></tr>{% endfor %}</table>{% endif %}
<h2>Anomalies</h2>
{% if not findings %}<p>None.</p>{% endif %}
{% for kind, items, hidden in findings %}<h3 id="{{ kind }}">{{ kind }}</h3>
{% for f in items %}<div class="finding {{ 'tolerated' if f.tolerated else '' }}
{{ 'unknown' if f.unknown else '' }}"><p>{{ f.explanation }}</p>
{% if f.tolerated %}<p><em>tolerated: {{ f.tolerated }}</em></p>{% endif %}
{% if f.unknown %}<p><em>unknown: cannot tell from this run</em></p>{% endif %}
{% if f.ops %}<p>operations: {% for i in f.ops %}<a href="#op-{{ i }}">{{ i }}</a>{{ ", " if
not loop.last }}{% endfor %}</p>
<table><tr><th>op</th><th>type</th><th>f</th><th>process</th><th>node</th>
<th>time (s)</th><th>value</th></tr>
{% for i in f.ops %}{% set o = ops.get(i) %}
<tr{% if anchor(i) %} id="op-{{ i }}"{% endif %}><td>{{ i }}</td>{% if o %}<td>{{ o.type }}</td>
<td>{{ o.f }}</td><td>{{ o.process }}</td><td>{{ o.node or "" }}</td>
<td>{{ "%.3f" % (o.time / 1e9) }}</td><td><code>{{ o.value }}</code></td>{% else %}
<td colspan="6"><em>not an op of this history</em></td>{% endif %}</tr>
{% endfor %}</table>{% endif %}</div>{% endfor %}
{% if hidden %}<p>… and {{ hidden }} more {{ kind }} (all in results.json).</p>{% endif %}
{% endfor %}
</body></html>
"""
)


def _cited_ops(parquet: Path, findings: list[Finding]) -> dict[int, dict[str, Any]]:
    """The rows of the ops the shown findings cite, read by their indices alone (row groups
    their statistics rule out are skipped): never the whole history."""
    wanted = sorted({i for f in findings for i in f.ops})
    if not wanted:
        return {}
    table = op_rows_at(
        parquet, wanted, ["index", "type", "f", "process", "node", "time", "value_json"]
    )
    out = {}
    for r in table.to_pylist():
        text = r.pop("value_json") or ""
        r["value"] = text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"
        out[r["index"]] = r
    return out


def _grouped(findings: list[Finding]) -> list[tuple[str, list[Finding], int]]:
    by_kind: dict[str, list[Finding]] = {}
    for f in findings:
        by_kind.setdefault(f.kind, []).append(f)
    out = []
    for kind, fs in sorted(by_kind.items()):
        # Failures first: they are what makes the run invalid.
        fs = sorted(fs, key=lambda f: (f.tolerated is not None or f.unknown, f.sort_key()))
        out.append((kind, fs[:SHOWN_PER_KIND], max(0, len(fs) - SHOWN_PER_KIND)))
    return out


def _elr(stats: dict[str, Any]) -> dict[str, Any] | None:
    """What the report shows of the ELR family's stats (checkers/families/elr/check.py): the
    partitions that ever had an ELR, a last known ELR or no leader, whole; the rest counted."""
    elr = stats.get("elr")
    if not isinstance(elr, dict):
        return None
    committed = (elr.get("committed") or {}).get("changes") or []
    marked = {
        (r["topic"], r["partition"])
        for r in committed
        if r.get("elr") or r.get("last_known_elr") or r.get("leader") == -1
    }
    shown = [r for r in committed if (r["topic"], r["partition"]) in marked]
    sampled = (elr.get("sampled") or {}).get("changes") or []
    with_elr = [r for r in sampled if r.get("elr") or r.get("last_known_elr")]
    summary = (
        f"{len(committed)} committed partition records replayed, {len(marked)} partitions with "
        f"an ELR, a last known ELR or no leader at some point; {len(sampled)} changes of a "
        f"broker's view sampled, {len(with_elr)} of them showing an ELR."
    )
    return {"summary": summary, "committed": shown, "sampled": with_elr}


def _ms(x: float) -> str:
    return "" if x != x else f"{x:.3g}"  # NaN: no ok op of that f


def write_report(out_dir: str | Path, parquet: str | Path, verdict: Verdict) -> Path:
    data = load(parquet)
    grouped = _grouped(verdict.findings)
    shown = [f for _, fs, _ in grouped for f in fs]
    anchored: set[int] = set()

    def anchor(i: int) -> bool:
        """The first row of op i on the page carries its id: every link to it goes there."""
        first = i not in anchored
        anchored.add(i)
        return first

    share = load_share(parquet, data.end_s)
    html = TEMPLATE.render(
        status=verdict.status,
        history=verdict.history,
        engine=verdict.engine,
        n_ops=data.n_ops,
        by_f=data.agg.summary(),
        ms=_ms,
        lat_pct=f"{(LAT_RATIO - 1) * 100:.1f}",
        anchor=anchor,
        counts=verdict.counts(),
        notes=verdict.notes,
        faults=data.faults,
        migration=data.migration,
        timeline=plots.timeline(data),
        binned=plots.binned(data),
        rates=plots.rates(data),
        quorum=plots.quorum(data.samples, data.faults, data.end_s) if data.samples else None,
        raft=plots.has_epochs(data.samples),
        findings=grouped,
        ops=_cited_ops(Path(parquet), shown),
        elr=_elr(verdict.stats),
        share=share,
        share_plot=plots.share_rates(share.edges, share.rates, data.faults, data.end_s)
        if share
        else None,
        liveness=verdict.liveness,
        coverage=verdict.coverage,
    )
    path = Path(out_dir) / REPORT_NAME
    path.write_text(html, encoding="utf-8")
    return path
