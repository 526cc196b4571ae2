"""A history checked streamed (spilled in buckets of whole keys, checked a bucket at a time:
checkers/families/queue/spill.py, streamed.py) must give exactly what the in-memory local engine
gives, and so what the reference engine gives: the same findings, the same edges in the same order,
the same cycles. Buckets are forced small here (load.STREAM_ABOVE, BATCH_ELEMENTS), so that
small generated histories have keys in different buckets, blocks of several keys, several
blocks per bucket, info sends and garbage reads answered across buckets, and cycles whose
edges come from different buckets."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.core import inputs as inputs_module
from checkers.families import cycles as cycles_module
from checkers.families.cycles import find_cycles
from checkers.families.edges import SpilledEdges
from checkers.families.queue.check import RESET_FS, queue_resets
from checkers.families.queue.dispatch import run_engine
from checkers.families.queue.source import ElementSource
from checkers.families.queue.spill import SpilledElements, plan_buckets
from checkers.scan import load as loading
from checkers.scan.load import load
from history.columnar import (
    ELEM_ROW,
    element_key_counts,
    is_in,
    read_element_keys,
    read_header,
    read_ops,
)
from history.format import after_abort_rule, idempotent_producers
from tests.unit.checkers.model import CONCURRENCY, INJECTIONS, KEYS, action_lists, run_model


@contextmanager
def streaming(budget: int | None) -> Iterator[None]:
    """Every history streamed in buckets of at most `budget` elements, its cycle search over
    groups of windows of at most `budget` ops; None: as configured (the histories here are far
    below the threshold: held whole)."""
    saved = loading.STREAM_ABOVE, loading.BATCH_ELEMENTS, cycles_module.WINDOW_GROUP_OPS
    if budget is not None:
        loading.STREAM_ABOVE, loading.BATCH_ELEMENTS = -1, budget
        cycles_module.WINDOW_GROUP_OPS = budget
    try:
        yield
    finally:
        loading.STREAM_ABOVE, loading.BATCH_ELEMENTS, cycles_module.WINDOW_GROUP_OPS = saved


def queue_check(path: Path, budget: int | None) -> tuple[list, list, list, int]:
    """As `kchaos check` runs the queue and cycle checks (checkers/registry.py): (findings,
    edges in order as rows, cycle findings, buckets: 0 when held whole)."""
    header = read_header(path)
    rule = after_abort_rule(header)
    with streaming(budget), tempfile.TemporaryDirectory() as scratch:
        loaded = load(
            path,
            list(RESET_FS),
            [],
            elements=True,
            spill_to=lambda: Path(tempfile.mkdtemp(dir=scratch)),
        )
        resets = queue_resets(read_ops(path, fs=RESET_FS), loaded.queue_ops, rule)
        source = ElementSource(
            arrays=loaded.elements,
            spilled=loaded.spilled,
            producers=idempotent_producers(header),
        )
        result = run_engine("local", source, resets, CONCURRENCY, rule)
        # Before `edges` joins the parts: a streamed check's are on disk (edges.SpilledEdges).
        assert isinstance(result.edge_parts, SpilledEdges) == (budget is not None)
        cycles = find_cycles(result.edge_parts, loaded.queue_ops, result.back_spans)
        edges = result.edges
        rows = list(zip(*(getattr(edges, f).tolist() for f in vars(edges)), strict=True))
        buckets = len(loaded.spilled) if loaded.spilled is not None else 0
    return [f.to_dict() for f in result.findings], rows, [f.to_dict() for f in cycles], buckets


def written(table: pa.Table, directory: Path, row_group: int) -> Path:
    path = directory / "history.parquet"
    pq.write_table(table, path, row_group_size=row_group)
    return path


def assert_streamed_alike(path: Path, budget: int) -> None:
    held = queue_check(path, None)
    streamed = queue_check(path, budget)
    assert held[3] == 0
    assert streamed[:3] == held[:3]
    reference = check(path, engine="reference", write=False)
    with streaming(budget):
        whole = check(path, engine="local", write=False)
    assert [f.to_dict() for f in whole.findings] == [f.to_dict() for f in reference.findings]
    assert whole.status == reference.status


budgets = st.sampled_from([1, 2, 5, 1 << 20])
row_groups = st.sampled_from([3, 7, 1 << 20])


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(sorted(INJECTIONS)), min_size=1, max_size=4),
    acts=action_lists,
    budget=budgets,
    row_group=row_groups,
)
def test_streamed_finds_what_held_and_reference_find(
    tmp_path_factory, kinds, acts, budget, row_group
):
    m = run_model(acts, final_poll=False)
    for i, kind in enumerate(kinds):
        INJECTIONS[kind](m, KEYS[i % len(KEYS)])
    m.final_poll()
    assert_streamed_alike(written(m.table(), tmp_path_factory.mktemp("h"), row_group), budget)


@settings(max_examples=25, deadline=None)
@given(acts=action_lists, budget=budgets, rnd=st.randoms())
def test_streamed_rows_in_any_order(tmp_path_factory, acts, budget, rnd):
    """Element rows stored out of (index, seq) order: each bucket is sorted whole on load."""
    m = run_model(acts, final_poll=False)
    INJECTIONS["lost-write"](m, 1)
    m.final_poll()
    table = m.table()
    elem = is_in(table.column("row"), [ELEM_ROW]).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(elem).tolist()
    rnd.shuffle(rows)
    order = [*np.flatnonzero(~elem).tolist(), *rows]
    path = written(table.take(pa.array(order, pa.int64())), tmp_path_factory.mktemp("h"), 5)
    assert_streamed_alike(path, budget)


def test_cycles_across_buckets_info_sends_and_reads_elsewhere(tmp_path):
    """A G1c whose two keys are in different buckets, a committed info send (its value polled
    from a key in another bucket than the one the poll question starts in), and a garbage
    read whose value was sent to a key in another bucket."""
    m = run_model(
        [("send", 0, k, "ok") for k in KEYS] + [("send", 0, 2, "info-happened")],
        final_poll=False,
    )
    for kind, key in (("G1c", 0), ("read-from-other-partition", 2), ("lost-write", 1)):
        INJECTIONS[kind](m, key)
    m.final_poll()
    path = written(m.table(), tmp_path, 4)
    findings, _, cycles, buckets = queue_check(path, 1)
    assert buckets == len(KEYS)
    kinds = {f["kind"] for f in findings} | {f["kind"] for f in cycles}
    assert {"G1c", "read-from-other-partition", "lost-write"} <= kinds
    assert_streamed_alike(path, 1)


def test_a_check_streams_above_the_threshold_and_removes_its_spill(tmp_path, monkeypatch):
    m = run_model([("send", 0, k, "ok") for k in KEYS] * 2, final_poll=False)
    INJECTIONS["G1c"](m, 0)
    m.final_poll()
    path = written(m.table(), tmp_path, 6)
    held = check(path, engine="local", write=False)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    made = []
    real = inputs_module.TemporaryDirectory

    def noted(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(inputs_module, "TemporaryDirectory", noted)
    with streaming(1):
        streamed = check(path, engine="local", write=False)
    assert [Path(d.name).parent for d in made] == [scratch]
    assert "streamed_buckets" not in held.stats
    assert streamed.stats["streamed_buckets"] == len(KEYS)
    assert [f.to_dict() for f in streamed.findings] == [f.to_dict() for f in held.findings]
    assert {f.kind for f in streamed.findings} >= {"G1c"}
    assert os.listdir(scratch) == []


def test_buckets_hold_whole_keys_within_the_budget():
    counts = np.array([3, 1, 1, 9, 2, 2, 2, 1])
    keys = np.arange(len(counts)) * 10
    buckets = plan_buckets(keys, counts, 4)
    assert np.concatenate([b.keys for b in buckets]).tolist() == keys.tolist()
    assert [b.size for b in buckets] == [4, 1, 9, 4, 3]
    assert all(b.size <= 4 or len(b.keys) == 1 for b in buckets)
    assert [b.first for b in buckets] == [0, 2, 3, 4, 6]
    assert plan_buckets(keys[:0], counts[:0], 4) == []


@settings(max_examples=30, deadline=None)
@given(acts=action_lists, row_group=row_groups)
def test_key_counts_are_the_keys_counted(tmp_path_factory, acts, row_group):
    path = written(run_model(acts).table(), tmp_path_factory.mktemp("h"), row_group)
    keys, counts = element_key_counts(path)
    want, many = np.unique(read_element_keys(path), return_counts=True)
    assert keys.tolist() == want.tolist()
    assert counts.tolist() == many.tolist()


def test_a_key_not_counted_or_miscounted_is_refused(tmp_path):
    table = run_model([("send", 0, 1, "ok")]).table()
    spill = SpilledElements(tmp_path / "s", np.array([0]), np.array([1]), 4)
    elems = table.filter(is_in(table.column("row"), [ELEM_ROW]))
    with pytest.raises(ValueError, match="not among the keys"):
        spill.add(elems)
    spill.close()
    assert not (tmp_path / "s").exists()
    spill = SpilledElements(tmp_path / "s", np.array([1]), np.array([elems.num_rows + 1]), 4)
    spill.add(elems)
    with pytest.raises(ValueError, match="rows given"):
        spill.finish()
    spill.close()
    spill = SpilledElements(tmp_path / "s", np.array([1]), np.array([elems.num_rows]), 4)
    spill.add(elems)
    assert spill.finish().load(0).key.tolist() == [1] * elems.num_rows
    spill.close()
    assert not (tmp_path / "s").exists()


def test_a_streamed_check_writes_its_report_too(tmp_path):
    m = run_model([("send", 0, k, "ok") for k in KEYS], final_poll=True)
    written(m.table(), tmp_path, 1 << 20)
    with streaming(2):
        verdict = check(tmp_path / "history.parquet", engine="local")
    assert verdict.status == "valid"
    notes = json.loads((tmp_path / "results.json").read_text())["notes"]
    assert not [n for n in notes if "report.html" in n]
    assert "VALID" in (tmp_path / "report.html").read_text()
