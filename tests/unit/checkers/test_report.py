"""report.html: content a person needs, drawn from a small generated run."""

from __future__ import annotations

import base64
import re

from checkers.api import check
from checkers.report.data import load
from tests.unit.checkers.histories import H
from tests.unit.checkers.runs import make_run


def test_report_shows_faults_quorum_and_the_anomaly_with_its_ops(tmp_path):
    run = make_run(tmp_path / "run", lose_write=True)
    verdict = check(run, engine="pandas")
    html = (run / "report.html").read_text()
    assert verdict.status == "invalid" and "INVALID" in html
    assert '<h3 id="lost-write">lost-write</h3>' in html
    lost = next(f for f in verdict.findings if f.kind == "lost-write")
    for i in lost.ops:  # every cited op is a row of the table under the finding
        assert f'<tr id="op-{i}"><td>{i}</td><td>ok</td>' in html
        assert f'<a href="#op-{i}">{i}</a>' in html
    assert "Controller quorum" in html and "<td>partition</td>" in html
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 3
    assert all(base64.b64decode(b)[:4] == b"\x89PNG" for b in images)


def test_fault_periods_and_leader_samples_from_the_history(tmp_path):
    run = make_run(tmp_path / "run")
    check(run, engine="pandas", write=False)
    data = load(run / "history.parquet")
    [fault] = data.faults
    assert fault.name == "partition" and fault.start_s < fault.end_s
    leaders = {(s.node, s.epoch) for s in data.samples if s.state == "leader"}
    assert leaders == {("n1", 2), ("n2", 3)}


def test_large_history_is_binned_not_drawn_per_op(tmp_path, monkeypatch):
    from checkers.report import data, plots

    run = make_run(tmp_path / "run")
    monkeypatch.setattr(data, "PER_OP_LIMIT", 10)
    check(run, engine="pandas")
    assert "Aggregated: each cell is the worst outcome" in (run / "report.html").read_text()
    loaded = load(run / "history.parquet")
    assert loaded.ops is None and plots.binned(loaded)
    assert len(base64.b64decode(plots.timeline(loaded))) < 200_000


def test_explanations_are_escaped(tmp_path):
    from checkers.core.findings import Finding
    from checkers.core.verdict import Verdict
    from checkers.report.render import write_report

    run = make_run(tmp_path / "run")
    check(run, engine="pandas", write=False)
    v = Verdict("invalid", [Finding("x", None, (0,), "a <script> & b")], history="h")
    html = write_report(run, run / "history.parquet", v).read_text()
    assert "a &lt;script&gt; &amp; b" in html and "<script>" not in html


def test_zookeeper_mode_samples_draw_the_active_controller(tmp_path):
    from tests.unit.checkers.histories import H

    h = H().send(0, 0, 1, 0).poll(1, {0: [(0, 1)]})
    zk = {"roles": ["broker"], "raft": None}
    for active in ("b1", "b2"):
        for node in ("b1", "b2"):
            h.observe(node, **zk, active_controller_count=int(node == active))
    h.observe("b3", roles=["broker"], raft=None, active_controller_count=None)  # no view
    h.write(tmp_path)
    check(tmp_path, engine="local")
    data = load(tmp_path / "history.parquet")
    assert [(s.node, s.active) for s in data.samples] == [
        ("b1", True), ("b2", False), ("b1", False), ("b2", True)
    ]  # fmt: skip
    html = (tmp_path / "report.html").read_text()
    assert "Controller quorum" in html and "ZooKeeper mode: each broker" in html


def test_migration_steps_are_listed_with_their_outcome_and_ops(tmp_path):
    h = H().send(0, 0, 1, 0)
    h.op("migration", "enable-migration", {"node": "b1"}, "ok", {"node": "b1"}, node="b1")
    h.op("migration", "await-dual-write", {}, "info", None, error="slow")
    h.invoke("migration", "kraft-broker", {"node": "b2"})
    data = load(h.write(tmp_path))
    assert [(m.name, m.start_index, m.end_index) for m in data.migration] == [
        ("enable-migration b1: ok", 2, 3),
        ("await-dual-write: info", 4, 5),
        ("kraft-broker: no completion", 6, None),
    ]
    # Steps are the run's own acts, not client operations.
    assert set(data.ops["process"]) == {"0"}


def test_a_valid_run_says_it_has_no_findings_instead_of_an_empty_table(tmp_path):
    H().send(0, 0, 1, 0).poll(1, {0: [(0, 1)]}).write(tmp_path)
    verdict = check(tmp_path, engine="local")
    html = (tmp_path / "report.html").read_text()
    assert verdict.status == "valid" and not verdict.counts()
    counts = html.split("<h2>Counts</h2>")[1].split("<h2>")[0]
    assert "No findings of any kind." in counts and "<table>" not in counts


def test_counts_link_each_kind_to_its_findings(tmp_path):
    run = make_run(tmp_path / "run", lose_write=True)
    check(run, engine="pandas")
    html = (run / "report.html").read_text()
    assert '<td><a href="#lost-write">lost-write</a></td>' in html
    assert '<h3 id="lost-write">' in html


def test_a_history_without_faults_says_so_instead_of_an_empty_table(tmp_path):
    h = H().send(0, 0, 1, 0).poll(1, {0: [(0, 1)]})
    h.write(tmp_path)
    check(tmp_path, engine="local")
    html = (tmp_path / "report.html").read_text()
    faults = html.split("<h2>Faults</h2>")[1].split("<h2>")[0]
    assert "No faults in this history." in faults and "<table>" not in faults
    assert "Shaded: fault periods" not in html


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_legends_sit_beside_the_plots_not_on_their_data(tmp_path):
    import matplotlib.pyplot as plt

    from checkers.report import plots

    run = make_run(tmp_path / "run")
    check(run, engine="pandas", write=False)
    data = load(run / "history.parquet")
    figures = [
        plots.timeline_figure(data),
        plots.rates_figure(data),
        plots.quorum_figure(data.samples, data.faults, data.end_s),
    ]
    legends = 0
    for fig in figures:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            if ax.get_legend() is not None:
                legends += 1
                box = ax.get_legend().get_window_extent(renderer)
                assert not any(_overlaps(box, a.get_window_extent(renderer)) for a in fig.axes)
        plt.close(fig)
    assert legends == 4  # timeline, latency, throughput, Raft epochs


def test_raft_epoch_ticks_are_whole_numbers(tmp_path):
    import matplotlib.pyplot as plt

    from checkers.report import plots

    run = make_run(tmp_path / "run")
    check(run, engine="pandas", write=False)
    data = load(run / "history.parquet")
    # One steady epoch: matplotlib's default ticks were 3.8, 3.9, ... 4.2 around it.
    steady = [s for s in data.samples if s.epoch == 2] or data.samples
    for samples in (data.samples, steady):
        fig = plots.quorum_figure(samples, data.faults, data.end_s)
        fig.canvas.draw()
        epochs = fig.axes[0]
        low, high = epochs.get_ylim()
        ticks = [t for t in epochs.get_yticks() if low <= t <= high]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        plt.close(fig)


def test_every_ok_latency_dot_is_inside_the_latency_axis(tmp_path):
    import matplotlib.pyplot as plt

    from checkers.report import plots
    from tests.unit.checkers.histories import SEC

    # Each round: one fast send and three slow ones, so every quantile line sits near the slow
    # ones, far above the fast dots, which the limits once cut off (39 of 634 dots in a real
    # 60 s run).
    h, offset = H(), 0
    for _ in range(12):
        for p in range(4):
            h.invoke(p, "send", [["send", 0, offset + p]])
        h.complete(0, "send", "ok", [["send", 0, [offset, offset]]])
        h.clock += 5 * SEC
        for p in range(1, 4):
            h.complete(p, "send", "ok", [["send", 0, [offset + p, offset + p]]])
        offset += 4
    h.write(tmp_path)
    check(tmp_path, engine="local", write=False)
    data = load(tmp_path / "history.parquet")
    ok = data.ops[data.ops["type"] == "ok"]
    ms = (ok["end_s"] - ok["start_s"]) * 1000
    fig = plots.rates_figure(data)
    low, high = fig.axes[0].get_ylim()
    plt.close(fig)
    assert ms.min() > 0 and low <= ms.min() and ms.max() <= high


def test_a_nodes_leadership_is_one_bar_per_uninterrupted_span():
    # Drawn per sample, a 10-minute run's thousands of bars took half the report's CPU.
    import matplotlib.pyplot as plt

    from checkers.report.data import Sample
    from checkers.report.plots import _bars

    states = ["leader", "leader", "follower", "leader", "leader"]
    samples = [Sample("n1", float(t), st, 1, 3) for t, st in enumerate(states)]
    fig, ax = plt.subplots()
    _bars(ax, samples, ["n1"], 10.0, lambda s: s.state == "leader")
    [bars] = ax.collections
    spans = [(float(e.x0), float(e.width)) for e in (p.get_extents() for p in bars.get_paths())]
    assert spans == [(0.0, 2.0), (3.0, 7.0)]
    plt.close(fig)


def test_partitions_that_had_an_elr_are_shown_with_their_committed_records(tmp_path):
    from checkers.core.verdict import Verdict
    from checkers.report.render import write_report

    run = make_run(tmp_path / "run")
    check(run, engine="pandas", write=False)

    def row(offset, partition, isr, elr, leader=1):
        return {"offset": offset, "record": "PARTITION_CHANGE_RECORD", "topic": "q",
                "partition": partition, "leader": leader, "leader_epoch": 3, "isr": isr,
                "elr": elr, "last_known_elr": []}  # fmt: skip

    committed = [row(40, 0, [1], [2]), row(41, 1, [1, 2], []), row(42, 0, [1, 2], [])]
    sampled = [{"time_s": 1.5, "op": 77, "broker": "n2", "topic": "q", "partition": 0,
                "leader": 1, "leader_epoch": 3, "isr": [1], "elr": [2],
                "last_known_elr": []}]  # fmt: skip
    stats = {"elr": {"committed": {"changes": committed}, "sampled": {"changes": sampled}}}
    html = write_report(run, run / "history.parquet", Verdict("valid", stats=stats)).read_text()
    section = html.split("Partitions: ISR and ELR")[1].split("<h2>")[0]
    # Partition 0 had an ELR: both its records; partition 1 never did: left out, counted.
    assert section.count("<td>q-0</td>") == 3 and "q-1" not in section
    assert "3 committed partition records replayed, 1 partitions" in section
