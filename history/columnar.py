"""The flat columnar form of a history: what Spark and the checkers scan.

One table, one Parquet file (`history.parquet`), two kinds of rows told apart by `row`:

- `row == "op"`: one row per history line, all fields, the value as JSON text.
- `row == "elem"`: one row per queue micro-op element (a send, or one [offset, value] a poll
  returned), carrying the fields of the operation it belongs to, so that a shuffle by `key`
  brings together everything a per-key check needs.

See docs/history.md for the column list; `SCHEMA` below is the authority.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history import strict_json
from history.errors import HistoryError
from history.format import (
    HEADER_METADATA,
    INFO,
    INVOKE,
    OP_FIELDS,
    QUEUE_FS,
    REBALANCE_FIELD,
    is_int64,
)
from history.reader import History

OP_ROW, ELEM_ROW = "op", "elem"
# The JSONL header rides along in the table's (and the Parquet file's) metadata, under
# format.HEADER_METADATA: what the writer declared of its clients (format.CONSUMER_AFTER_ABORT)
# must reach a check that reads only the columnar form.
SEND, POLL = "send", "poll"
QUEUE = sorted(QUEUE_FS)

_str = pa.dictionary(pa.int32(), pa.string())
FIELDS_COLUMN = "fields_json"
SCHEMA = pa.schema(
    [
        ("row", _str),
        ("index", pa.int64()),
        ("invoke_index", pa.int64()),
        ("type", _str),
        ("f", _str),
        ("process", _str),
        ("time", pa.int64()),
        ("invoke_time", pa.int64()),
        ("wall", pa.float64()),
        ("node", _str),
        ("error", pa.string()),
        ("value_json", pa.string()),
        ("mop", pa.int32()),
        ("seq", pa.int32()),
        ("kind", _str),
        ("key", pa.int64()),
        ("offset", pa.int64()),
        ("value", pa.int64()),
        ("rebalanced", pa.bool_()),
        # The producer instance of a pipelined send (docs/history.md), on its op row and its
        # element rows; null for every other op and for histories without the field.
        ("producer", pa.int64()),
        # The op's consumer-group and foreign-record fields (format.OP_FIELDS: rebalance,
        # commit, commit_error, foreign) it has, as one JSON object; null on element rows, on
        # ops without them, and absent from files written before the column existed.
        (FIELDS_COLUMN, pa.string()),
    ]
)
ELEMENT_COLUMNS = [
    "index",
    "invoke_index",
    "type",
    "f",
    "process",
    "time",
    "invoke_time",
    "mop",
    "seq",
    "kind",
    "key",
    "offset",
    "value",
    "rebalanced",
]
# What the checks decode for every element row and every queue op row: the wide columns (op
# text, wall time, node, error) are read only for the few op rows that need them.
ELEMENT_CHECK_COLUMNS = [
    "index", "type", "process", "time", "invoke_time", "seq", "kind", "key", "offset", "value",
    "rebalanced",
]  # fmt: skip
QUEUE_OP_COLUMNS = ["index", "invoke_index", "type", "process", "time"]
CHECK_COLUMNS = ["row", "f", "invoke_index", *ELEMENT_CHECK_COLUMNS]


def to_table(history: History) -> pa.Table:
    """The history as one Arrow table (op rows first, then element rows, each in index order)."""
    cols: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    incomplete = set(history.incomplete)
    for op in history.ops:
        add_op_row(cols, op, history.invoke_of.get(op["index"]))
    for op in history.ops:
        if op["f"] not in QUEUE_FS:
            continue
        if op["type"] == INVOKE:
            # An invocation that never completed is an info op whose arguments are all we know.
            if op["index"] in incomplete:
                add_elements(cols, history.path, op, op, INFO, complete_time=None)
            continue
        invoke = history.ops[history.invoke_of[op["index"]]]
        add_elements(cols, history.path, op, invoke, op["type"], complete_time=op["time"])
    return pa.table(cols, schema=SCHEMA).replace_schema_metadata(
        {HEADER_METADATA: strict_json.dumps(history.header)}
    )


# The columns an op row leaves null (element fields).
_OP_NULLS = ("invoke_time", "mop", "seq", "kind", "key", "offset", "value", "rebalanced")
# The columns an element row leaves null (op fields).
_ELEM_NULLS = ("wall", "node", "error", "value_json", FIELDS_COLUMN)
# json.dumps(..., separators=...) builds an encoder per call; this is the one it would build.
_COMPACT = strict_json.encoder(separators=(",", ":"))


def add_op_row(cols: dict[str, list[Any]], op: dict[str, Any], invoke_index: int | None) -> None:
    """Appends op's row to `cols` (a list per SCHEMA column). Column by column rather than a
    row dict: it runs once per history line."""
    get = op.get
    node, error, wall = get("node"), get("error"), get("wall")
    cols["row"].append(OP_ROW)
    cols["index"].append(op["index"])
    cols["invoke_index"].append(invoke_index)
    cols["type"].append(op["type"])
    cols["f"].append(op["f"])
    cols["process"].append(str(op["process"]))
    cols["time"].append(op["time"])
    # float(): Arrow refuses a Python int beyond int64 even for a float64 column.
    cols["wall"].append(None if wall is None else float(wall))
    cols["node"].append(None if node is None else str(node))
    cols["error"].append(None if error is None else str(error))
    cols["value_json"].append(_COMPACT(get("value")))
    cols["producer"].append(get("producer"))
    cols[FIELDS_COLUMN].append(_op_fields(op))
    for name in _OP_NULLS:
        cols[name].append(None)


def _op_fields(op: dict[str, Any]) -> str | None:
    fields = {name: op[name] for name in OP_FIELDS if op.get(name) is not None}
    return _COMPACT(fields) if fields else None


def add_elements(
    cols: dict[str, list[Any]],
    path: str,
    op: dict[str, Any],
    invoke: dict[str, Any],
    op_type: str,
    complete_time: int | None,
) -> None:
    """Appends the element rows of queue op `op` (its invocation `invoke`; both `op` for one
    never completed, `op_type` info) to `cols`; a malformed value is a HistoryError naming
    its line of `path`."""
    line = op["index"] + 2  # the file line: the header is line 1

    def bad(msg: str) -> HistoryError:
        return HistoryError(path, line, f"{op['f']} value: {msg}")

    mops = op.get("value")
    if mops is None and op_type != "ok":
        mops = invoke.get("value")  # a fail/info completion need not repeat its arguments
    if not isinstance(mops, list):
        raise bad(f"expected a list of micro-operations, found {mops!r:.60}")
    rebalanced = _rebalanced_keys(op, bad)
    rows = [(m, e) for m, mop in enumerate(mops) for e in _elements_of(mop, bad)]
    if not rows:
        return
    n = len(rows)
    # Column by column: this runs once per queue op, the columns' lists are long.
    for name, v in (
        ("row", ELEM_ROW),
        ("index", op["index"]),
        ("invoke_index", invoke["index"]),
        ("type", op_type),
        ("f", op["f"]),
        ("process", str(op["process"])),
        ("time", complete_time),
        ("invoke_time", invoke["time"]),
        ("producer", invoke.get("producer")),
    ):
        cols[name].extend([v] * n)
    for name in _ELEM_NULLS:
        cols[name].extend([None] * n)
    cols["mop"].extend([m for m, _ in rows])
    cols["seq"].extend(range(n))
    cols["kind"].extend([e[0] for _, e in rows])
    cols["key"].extend([e[1] for _, e in rows])
    cols["offset"].extend([e[2] for _, e in rows])
    cols["value"].extend([e[3] for _, e in rows])
    cols["rebalanced"].extend([e[1] in rebalanced for _, e in rows])


def _int_key(k: Any, bad: Any) -> int:
    # JSON object keys are strings; EDN and send micro-ops give ints.
    if is_int64(k):
        return k
    if isinstance(k, str):
        try:
            k = int(k)
        except ValueError:
            pass
        else:
            if is_int64(k):
                return k
    raise bad(f"key {k!r} is not an integer")


def _elements_of(mop: Any, bad: Any) -> list[tuple[str, int, int | None, int | None]]:
    if not isinstance(mop, list) or not mop or mop[0] not in (SEND, POLL):
        raise bad(f'micro-op {mop!r:.60} is neither ["send", ...] nor ["poll", ...]')
    if mop[0] == SEND:
        if len(mop) != 3:
            raise bad(f'send micro-op {mop!r:.60} is not ["send", key, value]')
        key, v = _int_key(mop[1], bad), mop[2]
        if isinstance(v, list):
            if len(v) != 2 or not all(x is None or is_int64(x) for x in v):
                raise bad(f"send result {v!r:.60} is not [offset, value]")
            return [(SEND, key, v[0], v[1])]
        if v is not None and not is_int64(v):
            raise bad(f"sent value {v!r:.60} is not an integer")
        return [(SEND, key, None, v)]
    if len(mop) == 1 or mop[1] is None:
        return []  # a poll invocation, or a poll that never returned
    if len(mop) != 2 or not isinstance(mop[1], dict):
        raise bad(f'poll micro-op {mop!r:.60} is not ["poll", {{key: [[offset, value], ...]}}]')
    out = []
    for k, pairs in mop[1].items():
        key = _int_key(k, bad)
        if not isinstance(pairs, list):
            raise bad(f"poll of key {key} returned {pairs!r:.60}, not a list")
        for pair in pairs:
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or not all(x is None or is_int64(x) for x in pair)
            ):
                raise bad(f"poll of key {key} returned {pair!r:.60}, not [offset, value]")
            out.append((POLL, key, pair[0], pair[1]))
    return out


def _rebalanced_keys(op: dict[str, Any], bad: Any) -> set[int]:
    """Keys whose assignment changed during the op: Jepsen's optional `rebalance_log`, and the
    keys of kchaos's `rebalance` events (assigned, revoked or lost while the op ran: the
    consumer's position on them may have moved to the group's committed offset)."""
    log = op.get("rebalance_log") or []
    if not isinstance(log, list):
        raise bad("rebalance_log is not a list")
    keys: set[int] = set()
    for event in log:
        if not isinstance(event, dict) or not isinstance(event.get("keys", []), list):
            raise bad(f'rebalance_log entry {event!r:.60} is not {{"keys": [...]}}')
        keys.update(_int_key(k, bad) for k in event.get("keys", []))
    events = op.get(REBALANCE_FIELD) or []
    if not isinstance(events, list):
        raise bad(f"{REBALANCE_FIELD} is not a list")
    for event in events:
        if not isinstance(event, list) or len(event) != 3 or not isinstance(event[1], list):
            raise bad(f"{REBALANCE_FIELD} event {event!r:.60} is not [event, [keys], time]")
        keys.update(_int_key(k, bad) for k in event[1])
    return keys


def write_parquet(history: History, path: str | Path) -> Path:
    """Write the columnar form; returns the path written."""
    out = Path(path)
    pq.write_table(to_table(history), out, row_group_size=1 << 20)
    return out


def read_header(path: str | Path) -> dict[str, Any]:
    """The header of the history a Parquet file was written from; {} for files written before
    it was kept there."""
    return header_of(_open(path).schema_arrow)


def header_of(schema: pa.Schema) -> dict[str, Any]:
    """The history header a table or Parquet schema carries (to_table puts it there)."""
    meta = schema.metadata or {}
    try:
        header = json.loads(meta.get(HEADER_METADATA, b"{}"))
    except ValueError:
        return {}
    return header if isinstance(header, dict) else {}


def is_in(col: pa.ChunkedArray, names: list[str]) -> pa.ChunkedArray:
    """Membership on a string column, as an Arrow mask (see _in)."""
    return pa.chunked_array([pa.array(_in(col, names), type=pa.bool_())], type=pa.bool_())


def _in(col: pa.ChunkedArray, names: list[str]) -> np.ndarray:
    """Membership on a string column, as numpy bools; on dictionary columns it looks each row's
    index up in a small table of the dictionary's answers, never decoding millions of strings."""
    if not pa.types.is_dictionary(col.type):
        return np.asarray(pc.is_in(col, pa.array(names)).combine_chunks(), dtype=bool)
    wanted = set(names)
    out = []
    for chunk in col.chunks:
        # The last entry answers for null rows.
        table = np.array([w in wanted for w in chunk.dictionary.to_pylist()] + [False])
        idx = chunk.indices
        at = (pc.fill_null(idx, len(table) - 1) if idx.null_count else idx).to_numpy()
        hits = np.flatnonzero(table)
        if len(hits) <= 3:  # a compare per hit streams; a lookup converts and gathers
            mask = np.zeros(len(at), dtype=bool)
            for h in hits.tolist():
                mask |= at == h
            out.append(mask)
        else:
            out.append(table[at])
    return np.concatenate(out) if out else np.zeros(0, dtype=bool)


def _rows(
    table: pa.Table, row: str, fs: list[str] | None = None, processes: list[str] | None = None
) -> pa.Table:
    mask = is_in(table.column("row"), [row])
    if fs is not None:
        mask = pc.and_(mask, is_in(table.column("f"), fs))
    if processes is not None:
        mask = pc.and_(mask, is_in(table.column("process"), processes))
    return table.filter(mask)


def elements(table: pa.Table) -> pa.Table:
    """Just the element rows, with the columns the queue checks use."""
    return _rows(table, ELEM_ROW).select(ELEMENT_COLUMNS)


def op_rows(
    table: pa.Table, fs: list[str] | None = None, processes: list[str] | None = None
) -> pa.Table:
    """Just the op rows (optionally only those with `f` in `fs`, `process` in `processes`):
    read_ops for a table."""
    return _rows(table, OP_ROW, fs, processes)


def read_table(path: str | Path) -> pa.Table:
    """The whole Parquet history in one read: cheaper than several filtered reads, each of
    which decodes the file again."""
    with _readable(path):
        return pq.read_table(path)


def read_elements(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """Element rows of a Parquet history, reading only `columns` (default: ELEMENT_COLUMNS).
    Row groups holding no element row are skipped by their statistics."""
    columns = ELEMENT_COLUMNS if columns is None else columns
    with _readable(path):
        table = pq.read_table(path, columns=["row", *columns], filters=[("row", "=", ELEM_ROW)])
    return table.select(columns)


def read_ops(
    path: str | Path,
    fs: list[str] | None = None,
    processes: list[str] | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """Op rows of a Parquet history, optionally only those with `f` in `fs` and with
    `process` in `processes`; only `columns` are read (default: all but `row`)."""
    filters: list[Any] = [("row", "=", OP_ROW)]
    if fs is not None:
        filters.append(("f", "in", fs))
    if processes is not None:
        filters.append(("process", "in", processes))
    return _read_op_rows(path, filters, columns)


def _read_op_rows(path: str | Path, filters: list[Any], columns: list[str] | None) -> pa.Table:
    cols = None if columns is None else ["row", *columns]
    with _readable(path):
        return pq.read_table(path, columns=cols, filters=filters).drop_columns(["row"])


@dataclass(frozen=True)
class CheckInput:
    """What `checkers.api.check` reads of a history, one row group at a time (check_parts)."""

    elements: pa.Table  # element rows, the element columns asked for
    queue_ops: pa.Table  # op rows with f in QUEUE_FS, QUEUE_OP_COLUMNS
    wide_ops: pa.Table  # op rows with f in wide_fs or process in wide_processes: every column


def check_parts(
    path: str | Path,
    wide_fs: list[str],
    wide_processes: list[str],
    element_columns: list[str] = ELEMENT_CHECK_COLUMNS,
) -> Iterator[CheckInput]:
    """The history one row group at a time, as `CheckInput`s in file order: CHECK_COLUMNS
    decoded and split into elements and queue ops; the wide columns (op text, wall, node, error)
    decoded only for row groups holding a row that needs them. A consumer that turns each part
    into its own arrays and drops it never holds more than one row group in Arrow form. A row
    group whose statistics show it holds only element rows (or only op rows) decodes only the
    columns those rows use (op rows and element rows are written in two blocks).
    `element_columns`: the element columns to decode (a subset of ELEMENT_CHECK_COLUMNS; a
    consumer that read the keys first with read_element_keys need not decode them again)."""
    op_columns = ["f", *QUEUE_OP_COLUMNS]  # the statistics said every row is an op row
    # An element column may be one the op rows need too (invoke_index): read once.
    mixed_columns = list(dict.fromkeys(["row", "f", "invoke_index", *element_columns]))
    mixed_columns += [c for c in QUEUE_OP_COLUMNS if c not in mixed_columns]
    pf = _open(path)
    empty = pf.schema_arrow.empty_table()
    no_wide = empty.drop_columns(["row"])
    for i in range(pf.num_row_groups):
        with _readable(path):
            only = _only_kind(pf.metadata.row_group(i))
            if only == ELEM_ROW:
                elems = pf.read_row_group(i, columns=element_columns)
                yield CheckInput(elems, empty.select(QUEUE_OP_COLUMNS), no_wide)
                continue
            rg = pf.read_row_group(i, columns=op_columns if only == OP_ROW else mixed_columns)
            # Masks as numpy bytes: Arrow's bitmaps cost a pack here and an unpack in _take.
            f = rg.column("f")
            queue = _in(f, QUEUE)
            needs = _in(f, wide_fs) | _in(rg.column("process"), wide_processes)
            if only == OP_ROW:
                elems = empty.select(element_columns)
            else:
                is_op = _in(rg.column("row"), [OP_ROW])
                queue &= is_op
                needs &= is_op
                elems = _take(rg.select(element_columns), _in(rg.column("row"), [ELEM_ROW]))
            queue_ops = _take(rg.select(QUEUE_OP_COLUMNS), queue)
            del rg, f
            wide = no_wide
            if needs.any():
                wide = _take(pf.read_row_group(i), needs).drop_columns(["row"])
        yield CheckInput(elems, queue_ops, wide)


def read_element_keys(path: str | Path) -> np.ndarray:
    """The `key` of every element row, in file order (the order `check_parts` gives them), as
    int64 (0 for a null): only that column is decoded, and only in row groups that hold
    elements. Lets a consumer place each element of a later row group straight into its final
    key-sorted position."""
    parts = list(_element_key_chunks(path))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _element_key_chunks(path: str | Path) -> Iterator[np.ndarray]:
    """The element rows' `key` (0 for a null), a non-empty chunk at a time in file order,
    decoded only from the row groups that hold elements."""
    for part in _row_groups_of(path, ELEM_ROW, ["key"]):
        key = part.column("key")
        with _readable(path):
            key = pc.fill_null(key, 0) if key.null_count else key
            chunks = [c.to_numpy() for c in key.chunks if len(c)]
        yield from chunks


def element_key_counts(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(keys, counts): each distinct `key` of the element rows, ascending (a null key counts as
    0, as in read_element_keys), and how many element rows hold it. Counted row group by row
    group: the keys of a history bigger than memory are never all held."""
    keys: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for chunk in _element_key_chunks(path):
        k, c = _counted(chunk)
        keys.append(k)
        counts.append(c)
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    every, of = np.unique(np.concatenate(keys), return_inverse=True)
    return every, np.bincount(of, weights=np.concatenate(counts), minlength=len(every)).astype(
        np.int64
    )


def _counted(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, their counts). Keys are partitions, a dense range of small
    integers: a bincount over the range, not np.unique's sort of a million rows."""
    lo, hi = int(x.min()), int(x.max())
    if hi - lo < 4 * len(x) + 1024:
        counts = np.bincount(x - lo if lo else x, minlength=hi - lo + 1)
        present = np.flatnonzero(counts)
        return present + lo, counts[present]
    return np.unique(x, return_counts=True)


def element_rows_at_most(path: str | Path) -> int:
    """An upper bound on the element rows of a Parquet history, from its metadata alone: the
    rows of every row group not known (by statistics) to hold only op rows."""
    meta = _open(path).metadata
    groups = (meta.row_group(i) for i in range(meta.num_row_groups))
    return sum(g.num_rows for g in groups if _only_kind(g) != OP_ROW)


def has_op_fields(path: str | Path) -> bool:
    """Might some op of this Parquet history carry a consumer-group or foreign-record field
    (FIELDS_COLUMN)? From the file's metadata alone: False when the column is absent (files
    written before it) or every row group's statistics count it null in every row; True when
    some row holds one, or a row group has no statistics to tell."""
    pf = _open(path)
    if FIELDS_COLUMN not in pf.schema_arrow.names:
        return False
    meta = pf.metadata
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            col = rg.column(j)
            if col.path_in_schema != FIELDS_COLUMN:
                continue
            st = col.statistics
            if st is None or not st.has_null_count or st.null_count != rg.num_rows:
                return True
    return False


def op_rows_at_most(path: str | Path) -> int:
    """An upper bound on the op rows of a Parquet history, from its metadata alone: the rows of
    every row group not known (by statistics) to hold only elements."""
    meta = _open(path).metadata
    groups = (meta.row_group(i) for i in range(meta.num_row_groups))
    return sum(g.num_rows for g in groups if _only_kind(g) != ELEM_ROW)


def _open(path: str | Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as e:
        raise _unreadable(path, e) from None


@contextmanager
def _readable(path: str | Path) -> Iterator[None]:
    try:
        yield
    except (OSError, pa.ArrowException) as e:
        raise _unreadable(path, e) from None


def _unreadable(path: str | Path, e: Exception) -> HistoryError:
    return HistoryError(path, None, f"not a readable Parquet history ({e})")


def _only_kind(rg: pq.RowGroupMetaData) -> str | None:
    """OP_ROW or ELEM_ROW when the statistics of the row group's `row` column show that every
    row is of that kind; None when they do not tell (no statistics, nulls, or both kinds)."""
    for j in range(rg.num_columns):
        col = rg.column(j)
        if col.path_in_schema != "row":
            continue
        st = col.statistics
        if st is None or not (st.has_min_max and st.has_null_count):
            return None
        if st.null_count != 0 or st.min != st.max:
            return None
        return st.min if st.min in (OP_ROW, ELEM_ROW) else None
    return None


def _take(table: pa.Table, mask: np.ndarray) -> pa.Table:
    """table.filter(mask); a slice when the rows are one run (op rows and element rows are
    written in two blocks, so nearly every row group is all of one or the other)."""
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return table.slice(0, 0)
    if rows[-1] - rows[0] + 1 == len(rows):
        return table.slice(int(rows[0]), len(rows))
    return table.take(pa.array(rows))


def element_row_groups(source: str | Path | pa.NativeFile) -> list[int]:
    """The row groups of a Parquet history that may hold element rows (by their statistics),
    in file order: the units a distributed reader splits element rows into."""
    pf = _open(source)
    return [i for i in range(pf.num_row_groups) if _only_kind(pf.metadata.row_group(i)) != OP_ROW]


def read_element_row_group(
    source: str | Path | pa.NativeFile, i: int, columns: list[str]
) -> pa.Table:
    """The element rows of row group `i`, only `columns`, in file order."""
    pf = _open(source)
    with _readable(str(source)):
        if _only_kind(pf.metadata.row_group(i)) == ELEM_ROW:
            return pf.read_row_group(i, columns=columns)
        rg = pf.read_row_group(i, columns=list(dict.fromkeys(["row", *columns])))
        return _take(rg.select(columns), _in(rg.column("row"), [ELEM_ROW]))


def op_row_groups(path: str | Path, columns: list[str]) -> Iterator[pa.Table]:
    """The op rows of a Parquet history one row group at a time, only `columns`, in file order;
    row groups holding only element rows (by their statistics) are never decoded. A consumer
    that folds each part into its aggregates holds one row group's few columns at a time."""
    return _row_groups_of(path, OP_ROW, columns)


def _row_groups_of(path: str | Path, kind: str, columns: list[str]) -> Iterator[pa.Table]:
    """The rows of one `kind` (OP_ROW or ELEM_ROW), only `columns`, a row group at a time in
    file order; row groups holding only the other kind (by their statistics) are not decoded."""
    pf = _open(path)
    for i in range(pf.num_row_groups):
        with _readable(path):
            only = _only_kind(pf.metadata.row_group(i))
            if only is not None and only != kind:
                continue
            if only == kind:
                part = pf.read_row_group(i, columns=columns)
            else:
                rg = pf.read_row_group(i, columns=list(dict.fromkeys(["row", *columns])))
                part = _take(rg.select(columns), _in(rg.column("row"), [kind]))
        yield part


def op_rows_at(path: str | Path, indices: list[int], columns: list[str]) -> pa.Table:
    """The op rows whose `index` is in `indices`, only `columns` (which must include "index"):
    a row group is read only if its `index` statistics admit one of them, and then first its
    `row` and `index` columns alone; the wide columns only when it holds a wanted row."""
    wanted = np.unique(np.asarray(indices, dtype=np.int64))
    pf = _open(path)
    parts = []
    for i in range(pf.num_row_groups):
        meta = pf.metadata.row_group(i)
        if _only_kind(meta) == ELEM_ROW or not _may_hold(meta, "index", wanted):
            continue
        with _readable(path):
            keys = pf.read_row_group(i, columns=["row", "index"])
            hit = _in(keys.column("row"), [OP_ROW]) & np.isin(
                keys.column("index").to_numpy(zero_copy_only=False), wanted
            )
            if hit.any():
                parts.append(_take(pf.read_row_group(i, columns=columns), hit))
    if not parts:
        return SCHEMA.empty_table().select(columns)
    return pa.concat_tables(parts)


def _may_hold(rg: pq.RowGroupMetaData, name: str, wanted: np.ndarray) -> bool:
    """Might the row group hold a row whose int column `name` is one of `wanted` (sorted)? From
    its statistics; True when it has none."""
    for j in range(rg.num_columns):
        col = rg.column(j)
        if col.path_in_schema != name:
            continue
        st = col.statistics
        if st is None or not st.has_min_max:
            return True
        lo = np.searchsorted(wanted, st.min)
        return bool(lo < len(wanted) and wanted[lo] <= st.max)
    return True


def op_rows_of(path: str | Path, processes: list[str], columns: list[str]) -> pa.Table:
    """The op rows whose `process` is in `processes` (the few rows of the nemesis or the
    observers), only `columns`, in file order: each row group's `row` and `process` are read
    first, its wide columns only when it holds such a row, one row group at a time."""
    pf = _open(path)
    parts = []
    for i in range(pf.num_row_groups):
        if _only_kind(pf.metadata.row_group(i)) == ELEM_ROW:
            continue
        with _readable(path):
            keys = pf.read_row_group(i, columns=["row", "process"])
            hit = _in(keys.column("row"), [OP_ROW]) & _in(keys.column("process"), processes)
            if hit.any():
                parts.append(_take(pf.read_row_group(i, columns=columns), hit))
    if not parts:
        return SCHEMA.empty_table().select(columns)
    return pa.concat_tables(parts)


def index_bound(path: str | Path) -> int | None:
    """One more than the largest `index` of any row, from the row groups' statistics alone;
    None when some row group has none to tell."""
    meta = _open(path).metadata
    top = -1
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        st = next(
            (rg.column(j).statistics for j in range(rg.num_columns)
             if rg.column(j).path_in_schema == "index"),
            None,
        )  # fmt: skip
        if rg.num_rows == 0:
            continue
        if st is None or not st.has_min_max:
            return None
        top = max(top, int(st.max))
    return top + 1
