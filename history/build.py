"""history.parquet built at the end of a run from what its writers recorded, without a merged
JSONL: the harness recorder's `history.jsonl` and the binary side files (history/sidefiles.py) a
JVM wrote its ops into, or the recorder a pipelined run's sends (docs/history.md, "Sends recorded
in the JVM", "Pipelined sends", "Columnar form").

The history it writes is the one history/merge.py would merge and history/stream.py would then
convert, row for row (tests/unit/history/test_build.py holds them equal): every op of every input,
ordered by `time`, ties keeping each input's own order, `history.jsonl`'s first, then the side
files in slot order and the final reads' last; indices renumbered densely in that order; op
rows in index order, then element rows in their op's index order, each kind in row groups of
ROW_GROUP_ROWS. What changes is how:

- the recorder's `history.jsonl` (nemesis, observer, polls, whatever was not written beside:
  small next to the sends) is read by the streamed converter's own code (stream.LinePass: the
  reader's checks, the same rows), its rows held with their own line indices;
- each side file is read with numpy a column at a time: its ops paired by a stable sort on
  `process` (each process invokes, completes, invokes, ...: the reader's rule, checked), the
  history's order found by one stable argsort of every op's time;
- the rows are then made and written a row group at a time, each input read over the range of
  its records that falls in that row group (each input's order is kept, so that range is one
  run of records), the op's `value_json` made by Arrow's string kernels, never a Python loop
  per row. What is held whole is a few int64 columns per op (time, partner, new index,
  producer: ~40 bytes an op), never the history.

`build_run` does it for a run directory, crash-safely: the Parquet file is written beside its
place and renamed into it; only then are the recorder's `history.jsonl` and the side files
removed. The Parquet header's `jvm_sends` marks a built history: side files (or a recorder's
history.jsonl without `jvm_sends` in its header) found beside it are left over from a build cut
short and only removed, never built twice. History.jsonl for people is derived from the Parquet
file on demand (history/export.py, `kchaos history`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history import strict_json
from history.columnar import ELEM_ROW, HEADER_METADATA, OP_ROW, POLL, SCHEMA, SEND
from history.errors import HistoryError
from history.format import (
    INFO,
    JSONL_NAME,
    JVM_SENDS_DIR,
    JVM_SENDS_FIELD,
    PARQUET_NAME,
)
from history.merge import Merged, SideFilesTaken, await_writer, merge_run, read_header_line
from history.merge import pending as merge_pending
from history.sidefiles import (
    ELEMENT,
    OP,
    POLLS_TAG,
    TYPES,
    SideFile,
    open_side,
    side_files,
)
from history.stream import (
    BLOCK_BYTES,
    BUILT_SIZE,
    CHUNK_LINES,
    ROW_GROUP_ROWS,
    SUMMARY_METADATA,
    LinePass,
    RowGroups,
    Summary,
    rows_table,
    summary_of,
)

# How long a build waits for a side file's writer (a JVM still flushing after its harness died)
# to let go of the file's lock.
LOCK_WAIT_S = 30.0
# Records read from a side file at once while scanning it (64 MB of sends).
SCAN_ROWS = 1 << 20
_INVOKE, _OK, _FAIL, _INFO = range(4)
_STR = pa.dictionary(pa.int32(), pa.string())


@dataclass
class Built(SideFilesTaken):
    """What a build did, and the built history's summary."""

    summary: Summary | None = None


class _Kept:
    """stream.LinePass's sink for the recorder's history: its rows kept as Arrow tables, with the
    history.jsonl's own line indices."""

    def __init__(self) -> None:
        self.op_tables: list[pa.Table] = []
        self.elem_tables: list[pa.Table] = []

    def ops(self, cols: dict[str, list[Any]]) -> None:
        if cols["index"]:
            self.op_tables.append(rows_table(cols))

    def elements(self, cols: dict[str, list[Any]]) -> None:
        if cols["index"]:
            self.elem_tables.append(rows_table(cols))

    def close(self, open_rows: pa.Table | None, summary: Summary) -> None:
        if open_rows is not None:
            self.elem_tables.append(open_rows)

    def discard(self) -> None:
        pass


@dataclass
class _Input:
    """One input's ops as the order and the pairing need them (op space: its ops in its
    order), and where its records are."""

    name: str
    n: int
    time: np.ndarray  # int64
    type: np.ndarray  # uint8, TYPES codes
    partner: np.ndarray  # int64: a completion's invocation (op position), -1 for invocations
    open: np.ndarray  # bool: an invocation never completed
    processes: np.ndarray  # the distinct int processes, sorted
    side: SideFile | None = None
    producer: np.ndarray | None = None  # sends: int64
    op_rec: np.ndarray | None = None  # polls: each op's record position
    elems: np.ndarray | None = None  # polls: each op's element count
    nodes: np.ndarray | None = None  # string indices used as nodes
    new: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def build(
    jsonl: Path,
    sides: list[SideFile],
    parquet: Path,
    *,
    row_group_rows: int = ROW_GROUP_ROWS,
    chunk_lines: int = CHUNK_LINES,
) -> Built:
    """Writes `parquet` from the recorder's `jsonl` and the side files (history/sidefiles.py),
    as merge.merge then stream.convert would; the Summary in its metadata describes no JSONL.
    HistoryError for a line or record that does not read, naming it; `parquet` is then left as
    it was."""
    done = Built(files=[s.name for s in sides], torn=[s.name for s in sides if s.torn])
    kept = _Kept()
    main_summary = LinePass(
        jsonl, None, chunk_lines, row_group_rows, BLOCK_BYTES, make_sink=lambda _: kept
    ).run()
    header = dict(main_summary.header)
    if JVM_SENDS_FIELD in header:
        raise HistoryError(jsonl, 1, "its JVM-recorded sends were merged already")
    done.history_torn = main_summary.torn_last_line
    header[JVM_SENDS_FIELD] = done.header_field()
    main_ops = _concat(kept.op_tables)
    main_elems = _concat(kept.elem_tables)
    main = _main_input(main_ops)
    inputs = [main] + [_scan(s) for s in sides]
    _check_disjoint(inputs)
    total = _order(inputs)
    done.ops = total
    done.side_ops = sum(i.n for i in inputs[1:])
    dicts = _Dicts.of(inputs, main_ops, main_elems)
    main_ops = dicts.recode(main_ops)
    main_elems = dicts.recode(main_elems)
    main_ops, main_elems = _renumbered(main_ops, main_elems, main.new)

    counts = dict(main_summary.counts)
    for inp in inputs[1:]:
        for code, name in enumerate(TYPES[1:], start=1):
            k = int(np.count_nonzero(inp.type == code))
            if k:
                counts[name] = counts.get(name, 0) + k
    incomplete = [main.new[i] for i in main_summary.incomplete]
    for inp in inputs[1:]:
        incomplete.extend(inp.new[inp.open].tolist())
    summary = Summary(
        path=str(parquet),
        header=header,
        ops=total,
        incomplete=sorted(int(i) for i in incomplete),
        counts=counts,
        op_fields=main_summary.op_fields,
        size=BUILT_SIZE,
        mtime_ns=BUILT_SIZE,
    )
    done.summary = summary
    tmp = parquet.with_name(f".{parquet.name}.{os.getpid()}.tmp")
    schema = SCHEMA.with_metadata({HEADER_METADATA: strict_json.dumps(header)})
    writer = _Behind(pq.ParquetWriter(tmp, schema, use_dictionary=_DICTIONARY_COLUMNS))
    try:
        wrote = False
        for s in range(0, total, row_group_rows):
            e = min(total, s + row_group_rows)
            writer.write_table(_op_chunk(inputs, main_ops, dicts, s, e), row_group_size=e - s)
            wrote = True
            _release()
        groups = RowGroups(writer, row_group_rows)
        for s, e in _element_ranges(inputs, main_elems, total, row_group_rows):
            groups.add(_element_chunk(inputs, main_elems, dicts, s, e))
            _release()
        groups.flush()
        if not (wrote or groups.written):
            writer.write_table(SCHEMA.empty_table())
        writer.close({SUMMARY_METADATA: strict_json.dumps(asdict(summary))})
        os.replace(tmp, parquet)
    except BaseException:
        with contextlib.suppress(Exception):
            writer.close()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return done


# Dictionary pages only for the dictionary columns: Parquet's writer otherwise tries one for
# every column, and gives up on each (indices, times, texts are nearly all distinct) only after
# filling it: a fifth of its time.
_DICTIONARY_COLUMNS = [f.name for f in SCHEMA if pa.types.is_dictionary(f.type)]


class _Behind:
    """A ParquetWriter whose row groups are written on a thread of their own while the next
    one is made (both are mostly Arrow's and numpy's own code, which let go of the GIL): one
    row group waits at most, so memory holds two."""

    def __init__(self, writer: pq.ParquetWriter) -> None:
        self.writer = writer
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="parquet-write")
        self.last: Future[None] | None = None

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        self._wait()
        self.last = self.pool.submit(self.writer.write_table, table, row_group_size)

    def _wait(self) -> None:
        if self.last is not None:
            last, self.last = self.last, None
            last.result()

    def close(self, metadata: dict[bytes, str] | None = None) -> None:
        try:
            self._wait()
            if metadata:
                self.writer.add_key_value_metadata(metadata)
        finally:
            self.pool.shutdown()
            self.writer.close()


def _release() -> None:
    """Arrow's allocator keeps what a row group freed for later; given back, the process's
    peak is what is held, not what was ever made."""
    pa.default_memory_pool().release_unused()


def _concat(tables: list[pa.Table]) -> pa.Table:
    if not tables:
        return SCHEMA.empty_table()
    return pa.concat_tables(tables)


# The inputs' ops: order and pairing ------------------------------------------------------------
def _main_input(ops: pa.Table) -> _Input:
    n = len(ops)
    procs = ops.column("process").cast(pa.string())
    ints = pc.match_substring_regex(procs, "^-?[0-9]+$")
    as_int = pc.filter(procs, ints)
    uniq = np.unique(np.asarray(as_int.cast(pa.int64()))) if len(as_int) else np.zeros(0, np.int64)
    return _Input(
        JSONL_NAME,
        n,
        np.asarray(ops.column("time").to_numpy(), dtype=np.int64),
        np.zeros(n, dtype=np.uint8),
        np.zeros(0, dtype=np.int64),
        np.zeros(n, dtype=bool),
        uniq,
    )


def _scan(side: SideFile) -> _Input:
    """A side file's ops: read a chunk of records at a time, checked, paired."""
    polls = side.tag == POLLS_TAG
    n = side.count
    # Sends: one op a record, so the columns' lengths are known; polls: their op records only
    # (gathered copies: a view would keep each chunk's records alive).
    time_ = np.empty(0 if polls else n, dtype=np.int64)
    process = np.empty_like(time_)
    producer = np.empty_like(time_)
    type_ = np.empty(len(time_), dtype=np.uint8)
    parts: list[np.ndarray] = []
    nodes = []
    n_strings = len(side.strings)
    for start, stop in side.chunks(SCAN_ROWS):
        r = side.read(start, stop)
        if polls:
            kind = r["kind"]
            bad = np.flatnonzero(kind > OP)
            if len(bad):
                raise side.error(start + int(bad[0]), f"record kind {kind[bad[0]]} is not 0 or 1")
            where = np.flatnonzero(kind == OP)
            ops = r[where]
            parts.append(ops)
        else:
            ops = r
            where = np.arange(len(r))
            time_[start:stop] = r["time"]
            process[start:stop] = r["process"]
            producer[start:stop] = r["producer"]
            type_[start:stop] = r["type"]
            node = r["node"]
            _in_table(side, start, where, node, n_strings, "node")
            nodes.append(np.unique(node[node >= 0]))
        bad = np.flatnonzero(ops["type"] > _INFO)
        if len(bad):
            rec = start + int(where[bad[0]])
            raise side.error(rec, f"type code {ops['type'][bad[0]]} is not one of 0-3")
        _in_table(side, start, where, ops["error"], n_strings, "error")
        del r, ops
    op_rec = None
    if polls:
        ops = np.concatenate(parts) if parts else np.zeros(0, dtype=side.dtype)
        time_, process, type_ = ops["a"].copy(), ops["c"].copy(), ops["type"].copy()
        op_rec = np.flatnonzero(_kinds(side) == OP)
    inp = _Input(side.name, len(time_), time_, type_, *_pair(side, process, type_, op_rec))
    del process
    inp.side = side
    if polls:
        assert op_rec is not None
        inp.op_rec = op_rec
        inp.elems = op_rec - np.concatenate([[-1], op_rec[:-1]]) - 1
        bad = np.flatnonzero((inp.elems > 0) & (type_ != _OK))
        if len(bad):
            raise side.error(
                int(op_rec[bad[0]]), f"{TYPES[type_[bad[0]]]} poll after element records"
            )
    else:
        inp.producer = producer
        inp.nodes = np.unique(_cat(nodes, np.int32))
    return inp


def _kinds(side: SideFile) -> np.ndarray:
    """A poll file's record kinds, one byte each."""
    out = np.empty(side.count, dtype=np.uint8)
    for start, stop in side.chunks(SCAN_ROWS):
        out[start:stop] = side.read(start, stop)["kind"]
    return out


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)


def _in_table(
    side: SideFile, start: int, where: np.ndarray, idx: np.ndarray, n: int, what: str
) -> None:
    bad = np.flatnonzero((idx < -1) | (idx >= n))
    if len(bad):
        raise side.error(
            start + int(where[bad[0]]),
            f"{what} names string {idx[bad[0]]}, beyond the {n} of {side.path.stem}.strings",
        )


def _pair(
    side: SideFile, process: np.ndarray, type_: np.ndarray, op_rec: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(partner, open, distinct processes): the reader's pairing (history/reader.py _pair) for
    one input: each process's ops alternate invocation, completion, ...; a completion's
    invocation is the op of its process just before it."""
    n = len(process)
    order = np.argsort(process, kind="stable")
    sp = process[order]
    st = type_[order]
    start = np.ones(n, dtype=bool)
    start[1:] = sp[1:] != sp[:-1]
    first = np.flatnonzero(start)
    # An op's place in its process's ops: invocations at even places, completions at odd.
    odd = (np.arange(n) - np.repeat(first, np.diff(np.append(first, n)))) % 2 == 1
    invoke = st == _INVOKE
    wrong = np.flatnonzero(invoke == odd)
    del odd
    if len(wrong):
        # The first wrong op in the file's order, as the reader would meet it.
        at = wrong[np.argmin(order[wrong])]

        def record(op: int) -> int:
            return op if op_rec is None else int(op_rec[op])

        p = int(sp[at])
        if invoke[at]:
            raise side.error(
                record(int(order[at])),
                f"process {p} invokes again while its op of record "
                f"{record(int(order[at - 1])) + 1} is still open",
            )
        raise side.error(
            record(int(order[at])), f"{TYPES[st[at]]} of process {p} without an invocation"
        )
    partner = np.full(n, -1, dtype=np.int64)
    done = ~invoke
    partner[order[done]] = order[np.flatnonzero(done) - 1]
    last = np.ones(n, dtype=bool)
    last[:-1] = start[1:]
    open_ = np.zeros(n, dtype=bool)
    open_[order[invoke & last]] = True
    return partner, open_, sp[first]


def _check_disjoint(inputs: list[_Input]) -> None:
    """Each client process's ops are in one input: pairing each input alone is then pairing
    the history (its order keeps each input's)."""
    procs = np.concatenate([i.processes for i in inputs])
    owner = np.concatenate([np.full(len(i.processes), k) for k, i in enumerate(inputs)])
    order = np.argsort(procs, kind="stable")
    sp = procs[order]
    dup = np.flatnonzero(sp[1:] == sp[:-1])
    if len(dup):
        a, b = owner[order[dup[0]]], owner[order[dup[0] + 1]]
        raise HistoryError(
            inputs[b].name,
            None,
            f"process {int(sp[dup[0]])} has ops in both {inputs[a].name} and {inputs[b].name}: "
            "a process is one writer's",
        )


def _order(inputs: list[_Input]) -> int:
    """Sets each input's `new` (its ops' indices in the history); the op count. By time, ties
    keeping each input's order and the inputs' order; a time that goes back within an input
    (never expected: each writer takes the time under its write lock) is ordered by the
    input's latest time so far, so its own order is kept."""
    keys = np.concatenate([np.maximum.accumulate(i.time) if i.n else i.time for i in inputs])
    total = len(keys)
    order = np.argsort(keys, kind="stable")
    del keys
    new = np.empty(total, dtype=np.int64)
    new[order] = np.arange(total, dtype=np.int64)
    del order
    at = 0
    for i in inputs:
        i.new = new[at : at + i.n]
        at += i.n
    return total


# Dictionaries shared by every row group ------------------------------------------------------
@dataclass
class _Dicts:
    row: pa.Array
    type: pa.Array
    f: pa.Array
    kind: pa.Array
    process: pa.Array
    node: pa.Array
    side_procs: np.ndarray  # sorted: the side files' processes, process dictionary 0..n-1
    node_of: list[np.ndarray]  # per side input: string index -> node dictionary index
    # Per side input: (lowest id, lookup table or None, its processes, their indices).
    _luts: list[tuple[int, np.ndarray | None, np.ndarray, np.ndarray]] = field(default_factory=list)

    @classmethod
    def of(cls, inputs: list[_Input], ops: pa.Table, elems: pa.Table) -> _Dicts:
        side_procs = np.unique(np.concatenate([i.processes for i in inputs[1:]] or [[]])).astype(
            np.int64
        )
        named = _distinct(ops, "process")  # disjoint from the side files' (_check_disjoint)
        node_names = set(_distinct(ops, "node"))
        for i in inputs[1:]:
            if i.nodes is not None:
                node_names.update(i.side.strings[k] for k in i.nodes.tolist())  # type: ignore[union-attr]
        nodes = sorted(node_names)
        at = {name: k for k, name in enumerate(nodes)}
        node_of = []
        for i in inputs[1:]:
            strings = i.side.strings  # type: ignore[union-attr]
            m = np.full(len(strings) + 1, -1, dtype=np.int32)  # the last answers -1 (none)
            if i.nodes is not None:
                for k in i.nodes.tolist():
                    m[k] = at[strings[k]]
            node_of.append(m)
        fs = sorted(set(_distinct(ops, "f")) | {SEND, POLL})
        luts = []
        for i in inputs[1:]:
            procs = i.processes
            codes = np.searchsorted(side_procs, procs).astype(np.int32)
            lo = int(procs[0]) if len(procs) else 0
            span = int(procs[-1]) - lo + 1 if len(procs) else 0
            lut = None
            if span <= max(8 * len(procs), 1 << 16):
                lut = np.zeros(span, dtype=np.int32)
                lut[procs - lo] = codes
            luts.append((lo, lut, procs, codes))
        return cls(
            row=pa.array([OP_ROW, ELEM_ROW]),
            type=pa.array(list(TYPES)),
            f=pa.array(fs),
            kind=pa.array([SEND, POLL]),
            process=pa.array([str(p) for p in side_procs.tolist()] + named, pa.string()),
            node=pa.array(nodes, pa.string()),
            side_procs=side_procs,
            node_of=node_of,
            _luts=luts,
        )

    def recode(self, table: pa.Table) -> pa.Table:
        """The table's dictionary columns on these dictionaries."""
        for name, d in (
            ("row", self.row),
            ("type", self.type),
            ("f", self.f),
            ("kind", self.kind),
            ("process", self.process),
            ("node", self.node),
        ):
            col = table.column(name).cast(pa.string())
            idx = pc.index_in(col, value_set=d).cast(pa.int32())
            table = table.set_column(
                table.schema.get_field_index(name), name, _dict(idx.combine_chunks(), d)
            )
        return table

    def process_codes(self, k: int, process: np.ndarray) -> np.ndarray:
        """The process dictionary's indices of processes of side input `k` (0: the first side
        file): a table lookup when the input's ids span a range not much wider than their
        number (a slot's lanes: dense, plus a stride per retirement), else a binary search."""
        lo, lut, procs, codes = self._luts[k]
        if lut is not None:
            return lut[process - lo]
        return codes[np.searchsorted(procs, process)]

    @property
    def by_column(self) -> dict[str, pa.Array]:
        return {
            "row": self.row, "type": self.type, "f": self.f, "kind": self.kind,
            "process": self.process, "node": self.node,
        }  # fmt: skip

    def f_code(self, name: str) -> int:
        return self.f.to_pylist().index(name)


def _distinct(table: pa.Table, name: str) -> list[str]:
    col = table.column(name).cast(pa.string())
    return [v for v in pc.unique(col).to_pylist() if v is not None]


def _dict(indices: Any, dictionary: pa.Array) -> pa.DictionaryArray:
    if not isinstance(indices, pa.Array):
        indices = pa.array(indices, pa.int32())
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def _codes(n: int, code: int, dictionary: pa.Array) -> pa.DictionaryArray:
    return _dict(np.full(n, code, dtype=np.int32), dictionary)


def _renumbered(ops: pa.Table, elems: pa.Table, new: np.ndarray) -> tuple[pa.Table, pa.Table]:
    """The recorder's rows with their ops' indices in the history; element rows sorted by it
    (the open invocations' rows were added last)."""

    def remap(t: pa.Table, name: str) -> pa.Table:
        col = t.column(name)
        if not len(t):
            return t
        raw = np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        mapped = pa.array(new[raw], mask=np.asarray(col.is_null().to_numpy(zero_copy_only=False)))
        return t.set_column(t.schema.get_field_index(name), name, mapped)

    ops = remap(remap(ops, "index"), "invoke_index")
    elems = remap(remap(elems, "index"), "invoke_index")
    if len(elems):
        order = np.argsort(elems.column("index").to_numpy(), kind="stable")
        elems = elems.take(pa.array(order))
    return ops.combine_chunks(), elems.combine_chunks()


# Rows ------------------------------------------------------------------------------------------
# A piece of a row group, before its rows are put in index order: per column, numpy values
# (dictionary columns as int32 indices, -1 for null), (values, null mask) for a nullable number,
# or an Arrow array (texts); absent: null. Ordering numpy arrays costs a fraction of ordering an
# Arrow table's.
_Piece = tuple[int, dict[str, Any]]
_TEXTS = frozenset(f.name for f in SCHEMA if f.type == pa.string())


def _range(inp: _Input, s: int, e: int) -> tuple[int, int]:
    """The input's ops with history indices in [s, e): one run, its order being kept."""
    lo, hi = np.searchsorted(inp.new, [s, e])
    return int(lo), int(hi)


def _op_chunk(inputs: list[_Input], main_ops: pa.Table, dicts: _Dicts, s: int, e: int) -> pa.Table:
    """The op rows of indices [s, e), in index order."""
    pieces: list[_Piece] = []
    if len(main_ops):
        idx = main_ops.column("index").to_numpy()
        lo, hi = np.searchsorted(idx, [s, e])
        if hi > lo:
            pieces.append(_table_piece(main_ops.slice(int(lo), int(hi - lo))))
    for k, inp in enumerate(inputs[1:]):
        lo, hi = _range(inp, s, e)
        if hi > lo:
            make = _poll_ops if inp.side.tag == POLLS_TAG else _send_ops  # type: ignore[union-attr]
            pieces.append(make(inp, dicts, k, lo, hi))
    at = np.concatenate([_values(p[1]["index"]) for p in pieces])
    perm = np.empty(e - s, dtype=np.int64)
    perm[at - s] = np.arange(len(at))
    return _assemble(pieces, perm, dicts)


def _assemble(pieces: list[_Piece], perm: np.ndarray | None, dicts: _Dicts) -> pa.Table:
    """One SCHEMA table of the pieces' rows, row k being row perm[k] of them all."""
    n = sum(p[0] for p in pieces)
    if perm is not None and len(pieces) == 1 and np.array_equal(perm, np.arange(n)):
        perm = None
    arrays = []
    for f in SCHEMA:
        got = [(m, cols.get(f.name)) for m, cols in pieces]
        if all(v is None for _, v in got):
            arrays.append(_nulls(n, f.type))
            continue
        if f.name in _TEXTS:
            arr = pa.concat_arrays([_nulls(m, f.type) if v is None else v for m, v in got])
            arrays.append(arr if perm is None else arr.take(pa.array(perm)))
        elif pa.types.is_dictionary(f.type):
            codes = np.concatenate(
                [np.full(m, -1, dtype=np.int32) if v is None else v for m, v in got]
            )
            if perm is not None:
                codes = codes[perm]
            null = codes < 0
            arrays.append(
                pa.DictionaryArray.from_arrays(
                    pa.array(codes, pa.int32(), mask=null if null.any() else None),
                    dicts.by_column[f.name],
                )
            )
        else:
            dtype = f.type.to_pandas_dtype()
            values, masks = [], []
            for m, v in got:
                if v is None:
                    values.append(np.zeros(m, dtype=dtype))
                    masks.append(np.ones(m, dtype=bool))
                elif isinstance(v, tuple):
                    values.append(v[0])
                    masks.append(v[1])
                else:
                    values.append(v)
                    masks.append(np.zeros(m, dtype=bool))
            vals = np.concatenate(values).astype(dtype, copy=False)
            mask = np.concatenate(masks)
            if perm is not None:
                vals, mask = vals[perm], mask[perm]
            arrays.append(pa.array(vals, f.type, mask=mask if mask.any() else None))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def _values(v: Any) -> np.ndarray:
    return v[0] if isinstance(v, tuple) else v


def _table_piece(t: pa.Table) -> _Piece:
    """The recorder's rows (a SCHEMA table on the shared dictionaries) as a piece."""
    cols: dict[str, Any] = {}
    for f in SCHEMA:
        col = t.column(f.name).combine_chunks()
        if col.null_count == len(col):
            continue
        if f.name in _TEXTS:
            cols[f.name] = col
        elif pa.types.is_dictionary(f.type):
            cols[f.name] = np.asarray(pc.fill_null(col.indices, -1).to_numpy(), dtype=np.int32)
        else:
            null = np.asarray(col.is_null().to_numpy(zero_copy_only=False))
            values = pc.fill_null(col, False if f.type == pa.bool_() else 0)
            cols[f.name] = (np.asarray(values.to_numpy(zero_copy_only=False)), null)
    return len(t), cols


_NULLS: dict[pa.DataType, pa.Array] = {}


def _nulls(n: int, type_: pa.DataType) -> pa.Array:
    """n nulls of the type: slices of one array made once (pa.nulls zeroes its buffers anew,
    ~25 ms a million, for each of a row group's ten empty columns)."""
    have = _NULLS.get(type_)
    if have is None or len(have) < n:
        have = _NULLS[type_] = pa.nulls(max(n, ROW_GROUP_ROWS), type_)
    return have.slice(0, n)


def _strings(side: SideFile, idx: np.ndarray) -> pa.Array | None:
    none = idx < 0
    if none.all():
        return None
    return pa.array(side.strings, pa.string()).take(pa.array(np.where(none, 0, idx), mask=none))


def _text(x: np.ndarray) -> pa.Array:
    return pa.array(x, pa.int64()).cast(pa.string())


def _offsets_text(offset: np.ndarray) -> pa.Array:
    return pc.fill_null(pa.array(offset, pa.int64(), mask=offset < 0).cast(pa.string()), "null")


def _partners(inp: _Input, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    partner = inp.partner[lo:hi]
    done = partner >= 0
    return inp.new[np.where(done, partner, 0)], ~done


def _send_ops(inp: _Input, dicts: _Dicts, k: int, lo: int, hi: int) -> _Piece:
    side = inp.side
    assert side is not None
    r = side.read(lo, hi)
    n = hi - lo
    type_ = r["type"].astype(np.int32)
    value_json = _send_values(r["key"], r["value"], r["offset"], type_ == _OK)
    return n, {
        "row": np.zeros(n, dtype=np.int32),
        "index": inp.new[lo:hi],
        "invoke_index": _partners(inp, lo, hi),
        "type": type_,
        "f": np.full(n, dicts.f_code(SEND), dtype=np.int32),
        "process": dicts.process_codes(k, r["process"]),
        "time": np.ascontiguousarray(r["time"]),
        "wall": r["wall_us"] / 1e6,
        "node": dicts.node_of[k][r["node"]],  # -1 reads the table's last entry: -1
        "error": _strings(side, r["error"]),
        "value_json": value_json,
        "producer": np.ascontiguousarray(r["producer"]),
    }


def _send_values(
    key: np.ndarray, value: np.ndarray, offset: np.ndarray, ok: np.ndarray
) -> pa.Array:
    """[["send",key,value]], and [["send",key,[offset,value]]] where `ok` (offset -1: null):
    one join of four texts, the first and last of a few distinct each (keys are partitions)."""
    keys, which = _small_ints(key)
    head = _decoded(which, [f'[["send",{k},' for k in keys.tolist()])
    tail = _decoded(ok.astype(np.int32), ["]]", "]]]"])
    mid = pa.array(np.where(offset < 0, 0, offset), pa.int64(), mask=~ok).cast(pa.string())
    if (ok & (offset < 0)).any():
        mid = pc.if_else(pa.array(ok & (offset < 0)), "null", mid)
    mid = pc.fill_null(pc.binary_join_element_wise("[", mid, ",", ""), "")
    return pc.binary_join_element_wise(head, mid, _text(value), tail, "")


def _small_ints(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, index of each x's value): every int of x's range when the range is small (keys
    are partitions: no sort of a million rows), else np.unique's."""
    if not len(x):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lo, hi = int(x.min()), int(x.max())
    if hi - lo < 1 << 16:
        return np.arange(lo, hi + 1), x.astype(np.int64) - lo
    return np.unique(x, return_inverse=True)


def _decoded(codes: np.ndarray, texts: list[str]) -> pa.Array:
    """texts[codes[i]] for each i: a dictionary's indices decoded (a copy of bytes, no
    formatting per row)."""
    d = pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(texts))
    return d.cast(pa.string())


def _poll_ops(inp: _Input, dicts: _Dicts, k: int, lo: int, hi: int) -> _Piece:
    side = inp.side
    assert side is not None and inp.op_rec is not None and inp.elems is not None
    first = int(inp.op_rec[lo] - inp.elems[lo])
    r = side.read(first, int(inp.op_rec[hi - 1]) + 1)
    at = inp.op_rec[lo:hi] - first
    ops = r[at]
    n = hi - lo
    type_ = ops["type"].astype(np.int32)
    counts = inp.elems[lo:hi]
    value_json = pa.array(np.full(n, '[["poll"]]', dtype=object), pa.string())
    ok = np.flatnonzero(type_ == _OK)
    if len(ok):
        # A batch of polls' values at a time, each of about ROW_GROUP_ROWS records (a poll
        # reads up to 20,000): their texts' temporaries stay a few hundred MB.
        cum = np.cumsum(counts[ok])
        bodies, a = [], 0
        while a < len(ok):
            b = max(int(np.searchsorted(cum, (cum[a - 1] if a else 0) + ROW_GROUP_ROWS)), a + 1)
            bodies.append(_poll_bodies(r, at[ok[a:b]], counts[ok[a:b]]))
            a = b
        value_json = _put(value_json, ok, pa.concat_arrays(bodies))
    return n, {
        "row": np.zeros(n, dtype=np.int32),
        "index": inp.new[lo:hi],
        "invoke_index": _partners(inp, lo, hi),
        "type": type_,
        "f": np.full(n, dicts.f_code(POLL), dtype=np.int32),
        "process": dicts.process_codes(k, ops["c"]),
        "time": ops["a"],
        "wall": ops["b"] / 1e6,
        "error": _strings(side, ops["error"]),
        "value_json": value_json,
    }


def _put(into: pa.Array, at: np.ndarray, values: pa.Array) -> pa.Array:
    """`into` with rows `at` replaced by `values` (in order)."""
    src = np.arange(len(into), dtype=np.int64)
    src[at] = np.arange(len(at)) + len(into)
    return pa.concat_arrays([into, values]).take(pa.array(src))


def _poll_bodies(r: np.ndarray, at: np.ndarray, counts: np.ndarray) -> pa.Array:
    """The values of ok polls whose op records are at `at` (in `r`) with `counts` elements
    each just before them: [["poll",{"<key>":[[offset,value],...],...}]], as the JVM's line
    (KchaosFinal.writeOk) wrote it."""
    total = int(counts.sum())
    first_of = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    seq = np.arange(total, dtype=np.int64) - np.repeat(first_of, counts)
    where = np.repeat(at - counts, counts) + seq
    key, offset, value = r["a"][where], r["b"][where], r["c"][where]
    op_first = seq == 0
    run_first = op_first.copy()
    run_first[1:] |= key[1:] != key[:-1]
    # What comes before each [offset, value]: "," within a key's run, the key's opening at a
    # run's start. Those are few (a poll reads a few partitions): a dictionary of them.
    starts = np.flatnonzero(run_first)
    tags = np.stack([key[starts], op_first[starts].astype(np.int64)], axis=1)
    distinct, which = np.unique(tags, axis=0, return_inverse=True)
    texts = [",["] + [(f'"{k}":[[' if first else f'],"{k}":[[') for k, first in distinct.tolist()]
    codes = np.zeros(total, dtype=np.int32)
    codes[starts] = np.asarray(which).reshape(-1) + 1
    pre = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(texts, pa.string()))
    pair = pc.binary_join_element_wise(
        pre.cast(pa.string()), _offsets_text(offset), ",", _text(value), "]", ""
    )
    lists = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32()), pair
    )
    body = pc.binary_join(lists, "")
    close = pa.array(np.where(counts > 0, "]", ""), pa.string())
    return pc.binary_join_element_wise('[["poll",{', body, close, "}]]", "")


def _element_ranges(
    inputs: list[_Input], main_elems: pa.Table, total: int, rows: int
) -> Iterator[tuple[int, int]]:
    """Ranges of op indices [s, e) holding about `rows` element rows each (an op with more
    stands alone): the element rows' chunks."""
    per_op = np.zeros(total, dtype=np.int64)
    if len(main_elems):
        np.add.at(per_op, main_elems.column("index").to_numpy(), 1)
    for inp in inputs[1:]:
        if inp.elems is not None:
            per_op[inp.new] += inp.elems
        else:
            per_op[inp.new] += (inp.partner >= 0) | inp.open
    cum = np.cumsum(per_op, out=per_op)
    s = 0
    while s < total:
        base = cum[s - 1] if s else 0
        e = max(int(np.searchsorted(cum, base + rows, side="right")), s + 1)
        yield s, min(e, total)
        s = e


def _element_chunk(
    inputs: list[_Input], main_elems: pa.Table, dicts: _Dicts, s: int, e: int
) -> pa.Table:
    """The element rows of the ops of indices [s, e), in their ops' index order."""
    pieces: list[_Piece] = []
    if len(main_elems):
        idx = main_elems.column("index").to_numpy()
        lo, hi = np.searchsorted(idx, [s, e])
        if hi > lo:
            pieces.append(_table_piece(main_elems.slice(int(lo), int(hi - lo))))
    for k, inp in enumerate(inputs[1:]):
        lo, hi = _range(inp, s, e)
        if hi > lo:
            make = _poll_elements if inp.side.tag == POLLS_TAG else _send_elements  # type: ignore[union-attr]
            piece = make(inp, dicts, k, lo, hi)
            if piece is not None:
                pieces.append(piece)
    if not pieces:
        return SCHEMA.empty_table()
    at = np.concatenate([_values(p[1]["index"]) for p in pieces])
    # Each piece is in order (its ops', then each op's elements'): a stable sort by op.
    return _assemble(pieces, np.argsort(at, kind="stable"), dicts)


def _send_elements(inp: _Input, dicts: _Dicts, k: int, lo: int, hi: int) -> _Piece | None:
    assert inp.side is not None and inp.producer is not None
    partner = inp.partner[lo:hi]
    open_ = inp.open[lo:hi]
    keep = np.flatnonzero((partner >= 0) | open_)
    if not len(keep):
        return None
    rec = inp.side.read(lo, hi)
    # Field by field: fancy indexing a structured array copies its records one by one.
    r = {name: rec[name][keep] for name in ("type", "process", "time", "key", "offset", "value")}
    del rec
    partner = partner[keep]
    open_ = open_[keep]
    at = keep + lo
    inv = np.where(open_, at, partner)  # an open invocation is its own
    n = len(keep)
    type_ = np.where(open_, TYPES.index(INFO), r["type"]).astype(np.int32)
    ok = type_ == _OK
    return n, {
        "row": np.ones(n, dtype=np.int32),
        "index": inp.new[at],
        "invoke_index": inp.new[inv],
        "type": type_,
        "f": np.full(n, dicts.f_code(SEND), dtype=np.int32),
        "process": dicts.process_codes(k, r["process"]),
        "time": (r["time"], open_),
        "invoke_time": inp.time[inv],
        "mop": np.zeros(n, dtype=np.int32),
        "seq": np.zeros(n, dtype=np.int32),
        "kind": np.zeros(n, dtype=np.int32),
        "key": r["key"].astype(np.int64),
        "offset": (r["offset"], ~ok | (r["offset"] < 0)),
        "value": r["value"],
        "rebalanced": np.zeros(n, dtype=bool),
        "producer": inp.producer[inv],
    }


def _poll_elements(inp: _Input, dicts: _Dicts, k: int, lo: int, hi: int) -> _Piece | None:
    assert inp.side is not None and inp.op_rec is not None and inp.elems is not None
    counts = inp.elems[lo:hi]
    total = int(counts.sum())
    if not total:
        return None
    first = int(inp.op_rec[lo] - inp.elems[lo])
    r = inp.side.read(first, int(inp.op_rec[hi - 1]) + 1)
    rec = np.flatnonzero(r["kind"] == ELEMENT)
    key, offset, value = r["a"][rec], r["b"][rec], r["c"][rec]
    op = lo + np.repeat(np.arange(hi - lo), counts)  # each element's op (op space)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    seq = np.arange(total) - np.repeat(starts, counts)
    procs = r["c"][inp.op_rec[lo:hi] - first]
    partner = inp.partner[op]
    n = total
    return n, {
        "row": np.ones(n, dtype=np.int32),
        "index": inp.new[op],
        "invoke_index": inp.new[partner],
        "type": np.full(n, _OK, dtype=np.int32),
        "f": np.full(n, dicts.f_code(POLL), dtype=np.int32),
        "process": dicts.process_codes(k, np.repeat(procs, counts)),
        "time": inp.time[op],
        "invoke_time": inp.time[partner],
        "mop": np.zeros(n, dtype=np.int32),
        "seq": seq.astype(np.int32),
        "kind": np.ones(n, dtype=np.int32),
        "key": key,
        "offset": (offset, offset < 0),
        "value": value,
        "rebalanced": np.zeros(n, dtype=bool),
    }


# Run directories -------------------------------------------------------------------------------
def _parquet_header(path: Path) -> dict[str, Any]:
    s = summary_of(path)
    return s.header if s is not None else {}


def built(run_dir: str | Path) -> bool:
    """Is the run's history.parquet built from its JVM's side files (its header says so)?"""
    return JVM_SENDS_FIELD in _parquet_header(Path(run_dir) / PARQUET_NAME)


def pending(run_dir: str | Path) -> bool:
    """Does the run have ops recorded in a JVM's binary side files that are not yet in a
    history? (Side files beside a built history are not pending: the build had only its
    clean-up left.)"""
    d = Path(run_dir) / JVM_SENDS_DIR
    return bool(side_files(d)) and not built(run_dir)


def build_run(run_dir: str | Path, lock_wait_s: float = LOCK_WAIT_S) -> Built | None:
    """Builds the run's history.parquet from its recorder's history.jsonl and its JVM's side
    files, in place; None when there was nothing to build. Waits up to `lock_wait_s` for a
    JVM still writing a side file; a file it still holds then is read as far as it was
    written (a torn tail dropped)."""
    run_dir = Path(run_dir)
    side_dir = run_dir / JVM_SENDS_DIR
    if not side_dir.is_dir():
        return None
    if not pending(run_dir):
        if built(run_dir):
            _clean(run_dir)  # a build cut short after its rename
        return None
    paths = side_files(side_dir)
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(p.open("rb")) for p in paths]
        deadline = time.monotonic() + lock_wait_s
        for f in files:
            await_writer(f, deadline)
        sides = [open_side(p) for p in paths]
        done = build(run_dir / JSONL_NAME, sides, run_dir / PARQUET_NAME)
    _clean(run_dir)
    return done


def sides_pending(run_dir: str | Path) -> bool:
    """Are ops a JVM recorded beside the run's history not yet in it: binary side files not
    built, or JSONL side files (written by kchaos before the binary ones) not merged?"""
    return pending(run_dir) or merge_pending(run_dir)


def finish_run(run_dir: str | Path) -> Built | Merged | None:
    """The run's history made whole from what its writers left: binary side files built into
    history.parquet (build_run), JSONL side files of a run recorded before them merged into
    history.jsonl (merge.merge_run); what either left of one cut short cleaned up. None when
    there was nothing to do. HistoryError or OSError when the inputs cannot be read: the run
    is then left as it was."""
    if pending(run_dir):
        return build_run(run_dir)
    if merge_pending(run_dir):
        return merge_run(run_dir)
    build_run(run_dir)  # at most the clean-up of a build cut short
    merge_run(run_dir)  # or of a merge
    return None


def describe(done: Built | Merged) -> str:
    """One line for the user on what finish_run did."""
    torn = f"; torn tail dropped: {', '.join(done.torn)}" if done.torn else ""
    if isinstance(done, Built):
        return f"history: {done.side_ops} JVM-recorded ops built into {PARQUET_NAME}{torn}"
    return f"history: {done.side_ops} JVM-recorded send ops merged into {JSONL_NAME}{torn}"


def _clean(run_dir: Path) -> None:
    """After a build: the recorder's history.jsonl (every op of it is in the Parquet file; a
    history.jsonl derived from the Parquet file, whose header says `jvm_sends`, is kept) and
    the side files."""
    jsonl = run_dir / JSONL_NAME
    if jsonl.exists() and JVM_SENDS_FIELD not in _jsonl_header(jsonl):
        jsonl.unlink()
    shutil.rmtree(run_dir / JVM_SENDS_DIR, ignore_errors=True)


def _jsonl_header(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            first = f.readline()
        return read_header_line(str(path), first) if first.endswith(b"\n") else {}
    except (OSError, HistoryError):
        return {}
