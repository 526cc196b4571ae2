"""history.jsonl to history.parquet in bounded memory: the record read a chunk of lines at a time.

The whole read (history/reader.py `read_history`, then columnar.py `to_table`) holds every op as
a Python dict: ~3.6 GB per million pipelined sends. `convert` reads the same lines with the same
checks (reader.read_op: the same HistoryError, naming the same line, for the same bad input)
and writes the same rows (columnar.add_op_row, add_elements) a chunk at a time, so what it holds
is the invocations still open (a process's invoke op until its completion: the sends in flight)
and one row group of each kind, never the history.

The table is to_table's, row for row and in the same order: every op row, in index order, then
every element row, in the index order of the op they come from (a completion's index; for an
invocation never completed, its own). Op rows go straight to the Parquet file; element rows
are spilled to an Arrow IPC stream beside it, in completion order, and copied after the op
rows, the elements of the invocations found never completed at the end (they are open
invocations, so few) put in their place as they pass. Spilling costs a write and a read of
the element rows (0.1 s for the 2M of a million sends); the alternative, a second pass over
the JSONL for its elements, costs the JSON decoding again (6 s for the same history's 2M
lines, of ~28 s for the whole conversion). Op rows and element rows are in separate row
groups, so each row group's `row` statistics say which kind it holds (columnar._only_kind), and
readers skip the ones they do not need.

What the checks and the run's summary want of the history whole (its notes, its counts) is the
`Summary` the pass returns; `convert` writes it into the Parquet file's metadata too, with the
JSONL's size and mtime, so that a later check of the same run reads it there instead of reading
the JSONL again (`summary_of`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history import strict_json
from history.columnar import (
    HEADER_METADATA,
    SCHEMA,
    add_elements,
    add_op_row,
)
from history.errors import HistoryError
from history.format import INFO, INVOKE, OP_FIELDS, QUEUE_FS, is_client
from history.reader import history_notes, parse_header, read_op, resolve_history_path

# The streamed pass's summary in the Parquet file's key-value metadata.
SUMMARY_METADATA = b"kchaos_summary"
# A built history's summary's `size` (history/build.py): it was read from no JSONL.
BUILT_SIZE = -1
# Rows per Parquet row group: write_parquet's.
ROW_GROUP_ROWS = 1 << 20
# Op rows or element rows made between two hand-overs to Arrow: bounds the Python lists held
# (one per column, ~20).
CHUNK_LINES = 1 << 16
BLOCK_BYTES = 1 << 22


@dataclass
class Summary:
    """What the streamed pass learned of a history besides its rows: all that the checks and
    the run's summary read of the history whole."""

    path: str
    header: dict[str, Any]
    ops: int  # operations (lines after the header, the torn one left out)
    torn_last_line: bool = False
    incomplete: list[int] = field(default_factory=list)  # invocations never completed
    # Client operations' completions by type (ok, fail, info): a Recorder's counts.
    counts: dict[str, int] = field(default_factory=dict)
    # Does some op carry a consumer-group or foreign-record field (format.OP_FIELDS)?
    op_fields: bool = False
    # The JSONL read: its size and mtime (ns) when the pass began.
    size: int = 0
    mtime_ns: int = 0

    def notes(self) -> list[str]:
        """reader.History.notes, said the same."""
        return history_notes(self.path, self.ops, self.torn_last_line, self.incomplete, self.header)

    @property
    def built(self) -> bool:
        """Was the Parquet file built from a JVM's side files (history/build.py), not converted
        from a history.jsonl? Its summary then names no JSONL (size -1)."""
        return self.size == BUILT_SIZE

    def describes(self, jsonl: Path) -> bool:
        """Was this summary made from `jsonl` as it is now (same size and mtime)?"""
        try:
            st = jsonl.stat()
        except OSError:
            return False
        return (st.st_size, st.st_mtime_ns) == (self.size, self.mtime_ns)


def summary_of(parquet: str | Path) -> Summary | None:
    """The Summary `convert` wrote into a Parquet history; None for a file without one (written
    by write_parquet, or before summaries) or one that cannot be read."""
    try:
        # The footer's own key-value metadata: the Arrow schema (and so a table read) does not
        # carry it, only the header.
        meta = pq.read_metadata(parquet).metadata or {}
        got = json.loads(meta[SUMMARY_METADATA])
        return Summary(**got)
    except (OSError, KeyError, ValueError, TypeError, pa.ArrowException):
        return None


def scan(jsonl: str | Path, chunk_lines: int = CHUNK_LINES) -> Summary:
    """The Summary of a history.jsonl (or a run directory's) and its lines checked, nothing
    written: reader.read_history's checks and notes in bounded memory. Malformed queue values
    are not checked here; `convert` checks them as it makes their element rows."""
    return LinePass(resolve_history_path(jsonl), None, chunk_lines, ROW_GROUP_ROWS).run()


def convert(
    jsonl: str | Path,
    parquet: str | Path,
    *,
    chunk_lines: int = CHUNK_LINES,
    row_group_rows: int = ROW_GROUP_ROWS,
    block_bytes: int = BLOCK_BYTES,
) -> Summary:
    """Writes `parquet` from `jsonl` (a history.jsonl or a run directory) in bounded memory:
    the table columnar.to_table(reader.read_history(jsonl)) would give, with a Summary of it in
    its metadata, which is returned. Raises the HistoryError read_history or to_table would,
    leaving `parquet` as it was (the file is written beside it and renamed over it)."""
    return LinePass(
        resolve_history_path(jsonl), Path(parquet), chunk_lines, row_group_rows, block_bytes
    ).run()


def _lines(f: Any, block_bytes: int) -> Iterator[tuple[bytes, ...] | bytes]:
    """The file's whole lines (without their newline), a block's worth at a time as a tuple;
    last, the bytes after the last newline (b"" when the file ends with one)."""
    rest = b""
    while True:
        block = f.read(block_bytes)
        if not block:
            yield rest
            return
        parts = (rest + block).split(b"\n")
        rest = parts.pop()
        if parts:
            yield tuple(parts)


class LinePass:
    """One pass over a history.jsonl's lines: the reader's checks, the Summary, and (given a
    Parquet path or a sink) the rows."""

    def __init__(
        self,
        jsonl: Path,
        parquet: Path | None,
        chunk_lines: int,
        row_group_rows: int,
        block_bytes: int = BLOCK_BYTES,
        make_sink: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.jsonl = jsonl
        # Where the rows go instead of a Parquet file of their own (history/build.py collects
        # the recorder's rows to merge them with the JVM's): an object with _Sink's methods.
        self.make_sink = make_sink
        self.parquet = parquet
        self.chunk_lines = max(1, chunk_lines)
        self.row_group_rows = max(1, row_group_rows)
        self.block_bytes = max(1, block_bytes)
        self.p = str(jsonl)
        self.pending: dict[Any, dict[str, Any]] = {}
        self.counts: Counter[str] = Counter()
        self.op_fields = False
        self.n = 0
        # The first element error (by the index to_table meets it at) and where: raised only
        # once every line has been read, since to_table runs after the whole read's checks.
        self.elem_error: tuple[int, HistoryError] | None = None

    def run(self) -> Summary:
        try:
            st = self.jsonl.stat()
            f = open(self.jsonl, "rb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise HistoryError(self.jsonl, None, f"cannot read: {e.strerror or e}") from None
        with f, contextlib.ExitStack() as cleanup:
            lines = _lines(f, self.block_bytes)
            header = self._header(lines)
            sink = None
            if self.make_sink is not None:
                sink = self.make_sink(header)
            elif self.parquet is not None:
                sink = _Sink(self.parquet, header, self.row_group_rows)
                cleanup.callback(sink.discard)
            torn = self._ops(lines, sink)
            summary = Summary(
                path=self.p,
                header=header,
                ops=self.n,
                torn_last_line=torn,
                incomplete=sorted(op["index"] for op in self.pending.values()),
                counts=dict(self.counts),
                op_fields=self.op_fields,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
            )
            if sink is not None:
                self._finish(sink, summary)
                cleanup.pop_all()
            return summary

    def _header(self, lines: Iterator[tuple[bytes, ...] | bytes]) -> dict[str, Any]:
        first = next(lines)
        if isinstance(first, bytes):  # no whole line at all
            if first:
                raise HistoryError(
                    self.p, 1, "the header line is torn: the run died before writing it"
                )
            raise HistoryError(self.p, None, "empty file: no header line")
        header = parse_header(self.p, first[0])
        self._first = first[1:]  # the op lines read with it
        return header

    def _ops(self, lines: Iterator[tuple[bytes, ...] | bytes], sink: _Sink | None) -> bool:
        """Reads every op line, handing rows to `sink`; returns whether the last line is torn."""
        p, pending, counts = self.p, self.pending, self.counts
        op_cols = _columns()
        elem_cols = _columns()
        rows = 0
        torn = False

        def blocks() -> Iterator[tuple[bytes, ...] | bytes]:
            yield self._first
            yield from lines

        for block in blocks():
            if isinstance(block, bytes):
                torn = block != b""
                break
            for raw in block:
                lineno = self.n + 2
                op, opened = read_op(p, lineno, raw, self.n, pending)
                self.n += 1
                kind = op["type"]
                if kind != INVOKE and is_client(op["process"]):
                    counts[kind] += 1
                if not self.op_fields and not op.keys().isdisjoint(OP_FIELDS):
                    self.op_fields = True
                if sink is None:
                    continue
                add_op_row(op_cols, op, None if opened is None else opened["index"])
                rows += 1
                if opened is not None and op["f"] in QUEUE_FS and self.elem_error is None:
                    try:
                        add_elements(elem_cols, p, op, opened, kind, complete_time=op["time"])
                    except HistoryError as e:
                        self.elem_error = (op["index"], e)
                # Rows of either kind: one poll may return thousands of records.
                if rows >= self.chunk_lines or len(elem_cols["index"]) >= self.chunk_lines:
                    sink.ops(op_cols)
                    sink.elements(elem_cols)
                    op_cols, elem_cols, rows = _columns(), _columns(), 0
        if sink is not None:
            sink.ops(op_cols)
            sink.elements(elem_cols)
        return torn

    def _finish(self, sink: _Sink, summary: Summary) -> None:
        """The invocations never completed made info element rows (to_table's rule), the first
        element error raised, and the file written."""
        open_rows = _columns()
        by_index = {op["index"]: op for op in self.pending.values()}
        for index in summary.incomplete:
            op = by_index[index]
            if op["f"] not in QUEUE_FS:
                continue
            if self.elem_error is not None and self.elem_error[0] < index:
                break
            try:
                add_elements(open_rows, self.p, op, op, INFO, complete_time=None)
            except HistoryError as e:
                self.elem_error = (index, e)
                break
        if self.elem_error is not None:
            raise self.elem_error[1]
        sink.close(rows_table(open_rows) if open_rows["index"] else None, summary)


def _columns() -> dict[str, list[Any]]:
    return {name: [] for name in SCHEMA.names}


def rows_table(cols: dict[str, list[Any]]) -> pa.Table:
    """Rows gathered column by column (a list per SCHEMA column) as a SCHEMA table."""
    return pa.table(cols, schema=SCHEMA)


class _Sink:
    """The Parquet file being written (beside `parquet`, renamed over it when done): op rows
    straight into it, element rows into a spill file until every op row is written."""

    def __init__(self, parquet: Path, header: dict[str, Any], row_group_rows: int) -> None:
        self.parquet = parquet
        self.tmp = parquet.with_name(f".{parquet.name}.{os.getpid()}.tmp")
        self.spill_path = parquet.with_name(f".{parquet.name}.{os.getpid()}.elements.tmp")
        self.schema = SCHEMA.with_metadata({HEADER_METADATA: strict_json.dumps(header)})
        self.row_group_rows = row_group_rows
        self.writer = pq.ParquetWriter(self.tmp, self.schema)
        self.spill: pa.ipc.RecordBatchStreamWriter | None = None
        self.op_groups = RowGroups(self.writer, row_group_rows)

    def ops(self, cols: dict[str, list[Any]]) -> None:
        if cols["index"]:
            self.op_groups.add(rows_table(cols))

    def elements(self, cols: dict[str, list[Any]]) -> None:
        if not cols["index"]:
            return
        table = rows_table(cols)
        if self.spill is None:
            self.spill = pa.ipc.new_stream(self.spill_path, SCHEMA)
        self.spill.write_table(table)

    def close(self, open_rows: pa.Table | None, summary: Summary) -> None:
        """Writes the element rows after the op rows, `open_rows` (element rows of invocations
        never completed, in index order) each in its place, and the summary."""
        self.op_groups.flush()
        groups = RowGroups(self.writer, self.row_group_rows)
        pending = open_rows
        if self.spill is not None:
            self.spill.close()
            self.spill = None
            # Read, not memory-mapped: a mapping of the whole spill would count in the RSS.
            with pa.OSFile(str(self.spill_path)) as f, pa.ipc.open_stream(f) as spilled:
                for batch in spilled:
                    table = pa.Table.from_batches([batch])
                    if pending is not None and len(table):
                        table, pending = _placed(table, pending)
                    groups.add(table)
        if pending is not None:
            groups.add(pending)
        groups.flush()
        if not (self.op_groups.written or groups.written):
            # No op at all: one empty row group, as write_parquet writes for an empty table.
            self.writer.write_table(SCHEMA.empty_table())
        self.writer.add_key_value_metadata({SUMMARY_METADATA: strict_json.dumps(asdict(summary))})
        self.writer.close()
        _unlink(self.spill_path)
        os.replace(self.tmp, self.parquet)

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            if self.spill is not None:
                self.spill.close()
        with contextlib.suppress(Exception):
            self.writer.close()
        _unlink(self.spill_path)
        _unlink(self.tmp)


def _placed(table: pa.Table, open_rows: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """(`table` with the open rows that belong among or before its rows put in index order,
    the open rows that come after it, or None). Both are in index order, and no op index is
    in both (an open invocation has no completion)."""
    last = table.column("index")[-1].as_py()
    at = open_rows.column("index").to_numpy()
    n = int(np.searchsorted(at, last))
    if n == 0:
        return table, open_rows
    merged = pa.concat_tables([table, open_rows.slice(0, n)])
    # A stable sort: the rows of one op keep their order (seq).
    merged = merged.take(pc.sort_indices(merged.column("index")))
    rest = open_rows.slice(n) if n < len(open_rows) else None
    return merged, rest


class RowGroups:
    """Tables gathered into row groups of `rows` rows (the last one smaller), each written as
    soon as it is full."""

    def __init__(self, writer: pq.ParquetWriter, rows: int) -> None:
        self.writer = writer
        self.rows = rows
        self.held: list[pa.Table] = []
        self.count = 0
        self.written = False

    def add(self, table: pa.Table) -> None:
        self.held.append(table)
        self.count += len(table)
        if self.count >= self.rows:
            whole = pa.concat_tables(self.held)
            done = (self.count // self.rows) * self.rows
            self.writer.write_table(whole.slice(0, done), row_group_size=self.rows)
            self.written = True
            rest = whole.slice(done)
            self.held, self.count = ([rest] if len(rest) else []), len(rest)

    def flush(self) -> None:
        if self.count:
            self.writer.write_table(pa.concat_tables(self.held), row_group_size=self.rows)
            self.written = True
        self.held, self.count = [], 0


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
