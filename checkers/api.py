"""The entry the harness calls: check one stored history, write results.json and summary.txt.

from checkers.api import check
verdict = check("results/queue/20261122T014500-42")   # or a history.jsonl / .parquet
verdict.exit_code                                     # 0 valid, 1 invalid, 2 unknown
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkers.admin import ADMIN_FS, admin_ops, check_admin, kraft_mode
from checkers.cycles import find_cycles
from checkers.data_log.check import check_run_data
from checkers.findings import Finding
from checkers.load import load
from checkers.memory import reused_memory
from checkers.metadata import check_metadata
from checkers.metadata_log.applied import unjudged_note
from checkers.metadata_log.check import check_run_metadata
from checkers.migration import migration_note
from checkers.observer_samples import MetadataInput, observe_samples_from_ops
from checkers.queue.check import (
    RESET_FS,
    check_queue_arrays,
    check_queue_reference,
    check_queue_table,
    queue_resets,
)
from checkers.queue.fencing import run_slots
from checkers.queue.policy import for_writer
from checkers.queue.vector import workers
from checkers.queue_ops import queue_ops_from_table
from checkers.run_files import read_cluster
from checkers.verdict import Verdict, decide
from checkers.zk_controller.check import check_run_zk
from history.columnar import header_of, is_in, op_rows, read_elements, read_header, write_parquet
from history.errors import HistoryError
from history.format import (
    DATA_LOGS_DIR,
    JSONL_NAME,
    METADATA_DIR,
    MIGRATION,
    NEMESIS,
    OBSERVER,
    PARQUET_NAME,
    after_abort_rule,
)
from history.names import Names
from history.reader import read_history

# auto picks the local vectorised path unless a Spark master is named: on one machine it beats
# local[*] Spark at every size (Spark's start alone costs 5.7 s, one shuffle of 10M rows more
# than the whole local check); see docs/checkers.md.
ENGINES = ("auto", "local", "pandas", "spark", "reference")


def check_table(
    table: pa.Table, slots: int | None = None, after_abort: str | None = None
) -> list[Finding]:
    """Every finding of an in-memory columnar history, on the pandas path (tests, small runs).
    `slots`: worker slots sharing transactional ids (a transactional run's concurrency);
    `after_abort`: the poll rule after aborts, by default the history header's."""
    rule = after_abort or after_abort_rule(header_of(table.schema))
    queue = check_queue_table(table, slots=slots, after_abort=rule)
    cycles = find_cycles(queue.edges, queue_ops_from_table(table))
    meta = check_metadata(observe_samples_from_ops(op_rows(table).to_pylist()))
    return for_writer(queue.findings + cycles, rule) + meta


def _locate(path: str | Path) -> tuple[Path, Path | None, Path]:
    """(out_dir, jsonl or None, parquet) for a run directory or a history file."""
    p = Path(path)
    if p.is_dir():
        jsonl = p / JSONL_NAME
        return p, jsonl if jsonl.exists() else None, p / PARQUET_NAME
    if not p.exists():
        raise HistoryError(p, None, "no such history file or run directory")
    if p.suffix == ".parquet":
        return p.parent, None, p
    if p.suffix == ".edn":  # Jepsen's Kafka workload: converted to history.jsonl beside it
        from history.edn import convert_edn_file

        return p.parent, convert_edn_file(p), p.parent / PARQUET_NAME
    return p.parent, p, p.parent / PARQUET_NAME


def _parquet_for(jsonl: Path | None, parquet: Path, notes: list[str]) -> Path:
    if jsonl is None:
        if not parquet.exists():
            raise HistoryError(parquet, None, f"no {JSONL_NAME} or {PARQUET_NAME} here")
        return parquet
    history = read_history(jsonl)
    notes.extend(history.notes())
    # The JSONL is the record; a Parquet older than it is rebuilt, never trusted.
    if not parquet.exists() or parquet.stat().st_mtime < jsonl.stat().st_mtime:
        write_parquet(history, parquet)
    return parquet


def _names(parquet: Path, header: dict[str, Any]) -> Names | None:
    try:
        names = Names.from_header(header)
    except ValueError as e:
        raise HistoryError(parquet, None, f"header: {e}") from None
    return names or None


def _highest_watermark(data: MetadataInput) -> int | None:
    marks = [s.raft("high_watermark") for s in data.samples]
    return max((m for m in marks if isinstance(m, int)), default=None)


def _check_metadata_logs(
    out_dir: Path,
    sends: list[dict[str, Any]],
    meta_input: MetadataInput,
    queue_findings: list[Finding],
    findings: list[Finding],
    notes: list[str],
) -> bool:
    """Adds the findings of a run directory's `data/` and `metadata/` logs; True if checked."""
    data = check_run_data(out_dir, sends)
    if data is not None:
        findings.extend(data.findings)
        notes.extend(data.notes)
    data_checked = data is not None and bool(data.logs)
    # A fenced broker's acknowledgement shows as a lost or misplaced write: such findings
    # corroborate a send the history attributes to a fenced broker.
    failing = {i for f in queue_findings if f.tolerated is None and not f.unknown for i in f.ops}
    result = check_run_metadata(
        out_dir,
        sends,
        _highest_watermark(meta_input),
        failing,
        meta_input,
        data.logs if data else None,
    )
    if result is None:
        return data_checked
    findings.extend(result.findings)
    notes.extend(result.notes)
    return result.checked or data_checked


def check(
    history_path_or_run_dir: str | Path,
    spark_master: str | None = None,
    *,
    engine: str = "auto",
    write: bool = True,
    spark: Any = None,
) -> Verdict:
    """Check a stored history. Raises HistoryError for a history that cannot be read.

    engine: "local" (vectorised numpy, in this process; "pandas" is its old name), "spark"
    (local[*] unless `spark_master`), "reference" (the per-key Python path, slow), or "auto"
    (Spark when a master is given, else local). `spark`: an existing SparkSession to reuse.
    """
    with reused_memory():
        return _check(history_path_or_run_dir, spark_master, engine, write, spark)


def _check(
    history_path_or_run_dir: str | Path,
    spark_master: str | None,
    engine: str,
    write: bool,
    spark: Any,
) -> Verdict:
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
    started = time.monotonic()
    notes: list[str] = []
    out_dir, jsonl, parquet = _locate(history_path_or_run_dir)
    parquet = _parquet_for(jsonl, parquet, notes)
    use_spark = engine == "spark" or (engine == "auto" and spark_master is not None)
    if use_spark and spark is None:
        from checkers.spark_session import spark_session

        spark = spark_session(spark_master)
    # Only the few op rows that need their text (resets, observer samples, nemesis, and sends
    # when metadata logs are checked) are read with every column; the rest narrow (CHECK_COLUMNS).
    has_logs = (out_dir / METADATA_DIR).is_dir() or (out_dir / DATA_LOGS_DIR).is_dir()
    local = not use_spark and engine != "reference"
    slots, slots_note = run_slots(out_dir)
    header = read_header(parquet)
    rule = after_abort_rule(header)
    names = _names(parquet, header)
    with ThreadPoolExecutor(workers()) as pool:
        data = load(
            parquet,
            [*RESET_FS, *ADMIN_FS, *(["send", "txn"] if has_logs else [])],
            [OBSERVER, NEMESIS, MIGRATION],
            elements=local,
            pool=pool,
        )
        wide, n_elems, ops = data.wide_ops, data.n_elements, data.queue_ops
        resets = queue_resets(wide.filter(is_in(wide.column("f"), RESET_FS)), ops, rule)
        if use_spark:
            from checkers.queue.spark import run_spark

            queue = run_spark(spark, str(parquet), resets, slots, rule)
        elif engine == "reference":
            queue = check_queue_reference(read_elements(parquet), resets, slots, rule)
        else:
            arrays = data.elements
            assert arrays is not None  # load(elements=True)
            del data  # from here on the arrays are held once, by `arrays` alone
            queue = check_queue_arrays(arrays, resets, pool, slots, rule)
            del arrays
    cycles = find_cycles(queue.edge_parts, ops, queue.back_spans)
    meta_ops = wide.filter(
        is_in(wide.column("process"), [OBSERVER, NEMESIS, MIGRATION])
    ).to_pylist()
    sends = wide.filter(is_in(wide.column("f"), ["send", "txn"])).to_pylist() if has_logs else []
    admin = admin_ops(wide.filter(is_in(wide.column("f"), list(ADMIN_FS))).to_pylist())
    del wide
    note = migration_note(meta_ops)
    if note:
        notes.append(note)
    meta_input = observe_samples_from_ops(meta_ops)
    meta = check_metadata(meta_input)
    admin_findings, admin_notes = check_admin(admin, kraft_mode(read_cluster(out_dir), meta_input))
    notes.extend(admin_notes)
    findings = for_writer(queue.findings + cycles, rule) + meta + admin_findings
    logs_checked = has_logs and _check_metadata_logs(
        out_dir, sends, meta_input, queue.findings, findings, notes
    )
    zk = check_run_zk(out_dir, meta_input.samples)
    if zk is not None:
        findings += zk.findings
        notes += zk.notes
    if not has_logs:
        notes += unjudged_note(meta_input, "the run has no decoded metadata logs (metadata/)")
    if queue.subscribe:
        notes.append("consumers subscribe: poll-skip and nonmonotonic-poll are tolerated")
    if slots_note and n_elems:
        notes.append(slots_note)
    checked = (
        n_elems > 0
        or bool(meta_input.samples)
        or logs_checked
        or bool(admin)
        or bool(zk and zk.checked)
    )
    if not checked:
        notes.append("no queue elements, admin ops or observer samples: nothing to check")
    if names:
        # Jepsen's keywords and strings were numbered for the columnar form: said back in them.
        findings = [replace(f, explanation=names.rename(f.explanation)) for f in findings]
    verdict = Verdict(
        status=decide(findings, checked),
        findings=findings,
        notes=notes,
        history=str(jsonl or parquet),
        engine="spark" if use_spark else "reference" if engine == "reference" else "local",
        stats={
            "elements": n_elems,
            "observer_samples": len(meta_input.samples),
            "admin_ops": len(admin),
            "seconds": round(time.monotonic() - started, 3),
            **({"zk_controller": zk.stats} if zk is not None else {}),
        },
    )
    if write:
        verdict.write(out_dir)
        _write_report(out_dir, parquet, verdict)
    return verdict


def _write_report(out_dir: Path, parquet: Path, verdict: Verdict) -> None:
    from checkers.report.render import write_report  # matplotlib: only when writing

    try:
        write_report(out_dir, parquet, verdict)
    except Exception as e:  # the report is for people; its failure must not cost the verdict
        verdict.notes.append(f"report.html not written: {type(e).__name__}: {e}")
