"""history.jsonl derived from history.parquet, for people and for readers of the JSONL form.

A run whose JVM recorded its ops keeps its history as history.parquet alone (history/build.py:
no merged JSONL is written at the end); `kchaos history RUN_DIR` writes the JSONL on demand, and
`reader.read_history` of such a run directory reads it so. Each op row becomes its line: the
header first (the Parquet file's `kchaos_header`), then `index`, `type`, `f`, `value` (the row's
`value_json` as it is), `process` (an int when it is one's decimal text), `time`, `wall`, `node`,
and, when the row has them, `error`, `producer` and the fields of `fields_json`. That is every
field a kchaos recorder writes (format.RECORDER_FIELDS, OP_FIELDS), so the lines read back as
the ops they were; a field the columnar form does not carry (Jepsen's `rebalance_log`) is not
in them.

Lines are made a row group at a time with Arrow's string kernels; texts that need JSON escaping
(node names, errors, process names) are escaped once per distinct text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history import strict_json
from history.errors import HistoryError
from history.format import HEADER_METADATA

# history/columnar.py's names (columnar reads histories through history/reader.py, which reads
# a built one through this module: the few names are repeated rather than imported round).
FIELDS_COLUMN = "fields_json"
OP_ROW = "op"

_COLUMNS = [
    "index", "type", "f", "value_json", "process", "time", "wall", "node", "error", "producer",
    FIELDS_COLUMN,
]  # fmt: skip


def jsonl_lines(parquet: str | Path) -> Iterator[bytes]:
    """The history's JSONL: its header line, then its op lines a row group at a time."""
    try:
        pf = pq.ParquetFile(parquet)
    except (OSError, pa.ArrowException) as e:
        raise HistoryError(parquet, None, f"not a readable Parquet history ({e})") from None
    meta = pf.schema_arrow.metadata or {}
    try:
        header = json.loads(meta.get(HEADER_METADATA, b"{}"))
    except ValueError:
        header = {}
    yield strict_json.dumps(header).encode() + b"\n"
    have = [c for c in _COLUMNS if c in pf.schema_arrow.names]
    for i in range(pf.num_row_groups):
        # Op rows and element rows are in row groups of their own: the kind column first.
        kind = pf.read_row_group(i, columns=["row"]).column("row").cast(pa.string())
        ops = pc.equal(kind, OP_ROW)
        if not pc.any(ops).as_py():
            continue
        part = pf.read_row_group(i, columns=have)
        if not pc.all(ops).as_py():
            part = part.filter(ops)
        yield _lines(part)


def op_lines(path: str | Path) -> Iterator[bytes]:
    """The op lines (without the header) of a run directory's or a history.jsonl path's
    history: the file's own when it exists, else those derived from the history.parquet
    beside it (a built history's)."""
    p = Path(path)
    jsonl = p / "history.jsonl" if p.is_dir() else p
    if jsonl.is_file():
        with jsonl.open("rb") as f:
            next(f, None)
            yield from f
        return
    chunks = jsonl_lines(jsonl.with_name("history.parquet"))
    next(chunks)  # the header
    for chunk in chunks:
        yield from chunk.splitlines(keepends=True)


def write_jsonl(parquet: str | Path, out: IO[bytes]) -> int:
    """Writes the history's JSONL to `out`; returns the op lines written."""
    n = -1
    for chunk in jsonl_lines(parquet):
        out.write(chunk)
        n += chunk.count(b"\n")
    return n


def jsonl_bytes(parquet: str | Path) -> bytes:
    return b"".join(jsonl_lines(parquet))


def _lines(t: pa.Table) -> bytes:
    def col(name: str) -> pa.Array:
        c = t.column(name) if name in t.column_names else pa.nulls(len(t))
        return c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c

    def text(name: str) -> pa.Array:
        return col(name).cast(pa.string())

    def optional(key: str, values: pa.Array) -> pa.Array:
        return pc.fill_null(pc.binary_join_element_wise(f',"{key}":', values, ""), "")

    wall = pc.fill_null(_floats(col("wall")), "null")
    fields = col(FIELDS_COLUMN).cast(pa.string())
    more = pc.fill_null(
        pc.binary_join_element_wise(",", pc.utf8_slice_codeunits(fields, 1, -1), ""), ""
    )
    line = pc.binary_join_element_wise(
        '{"index":', text("index"),
        ',"type":', _json_texts(col("type"), "null"),
        ',"f":', _json_texts(col("f"), "null"),
        ',"value":', pc.fill_null(col("value_json"), "null"),
        ',"process":', _json_texts(col("process"), "null", ints=True),
        ',"time":', text("time"),
        ',"wall":', wall,
        ',"node":', _json_texts(col("node"), "null"),
        optional("error", _json_texts(col("error"), None)),
        optional("producer", text("producer")),
        more,
        "}\n",
        "",
    )  # fmt: skip
    # The lines' bytes are one run in the array's data buffer: taken as they are.
    line = line.combine_chunks() if isinstance(line, pa.ChunkedArray) else line
    offsets = np.frombuffer(line.buffers()[1], dtype=np.int32)[line.offset :]
    return line.buffers()[2].to_pybytes()[offsets[0] : offsets[len(line)]]


def _json_texts(values: pa.Array, null: str | None, ints: bool = False) -> pa.Array:
    """Each text as a JSON string (`ints`: a decimal integer's text as the number), each
    distinct text escaped once; nulls as `null` (or left null)."""
    d = values if pa.types.is_dictionary(values.type) else values.dictionary_encode()
    entries = d.dictionary.to_pylist()
    encoded = [
        e if ints and _is_int(e) else strict_json.dumps(e, ensure_ascii=False) for e in entries
    ]
    out = pa.array(encoded, pa.string()).take(d.indices)
    return pc.fill_null(out, null) if null is not None else out


def _is_int(s: str) -> bool:
    body = s[1:] if s[:1] == "-" else s
    return body.isascii() and body.isdigit()


def _floats(wall: pa.Array) -> pa.Array:
    """Floats as JSON numbers that read back as floats: Arrow's shortest text, with ".0" where
    it wrote none (1795312345.0 is "1795312345" to Arrow, an int to a JSON reader)."""
    s = wall.cast(pa.string())
    whole = pc.invert(pc.match_substring_regex(s, "[.eEn]"))
    return pc.if_else(whole, pc.binary_join_element_wise(s, ".0", ""), s)
