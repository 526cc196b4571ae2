"""The history's sends as the data-log checks read them: arrays, never one object per send.

- the acknowledged writes: each `send` micro-op of an ok send/txn completion whose `[offset,
  value]` is known, as (op, key, offset, value) in history order: what an ok send says was
  appended where;
- who sent each value: every send element's value, the op that sent it (its completion, else
  its invocation) with that op's type and process; looked up only for the values a finding
  cites (values are unique: kchaos sends each once).

Read from the columnar history's element rows (`row = "elem"`, `kind = "send"`: docs/history.md),
or built from op rows as dicts (tests, small histories), with the same meaning: the element
rows are the completions' sends, or the invocation's when it never completed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history.columnar import element_row_groups, read_element_row_group
from history.format import is_int64

# The element columns read (history/columnar.py SCHEMA).
COLUMNS = ("index", "type", "process", "key", "offset", "value")
ELEM, SEND = "elem", "send"


@dataclass(frozen=True)
class OpRef:
    """The op that sent a value, as a finding names it."""

    index: int
    type: str
    process: str | None


@dataclass
class Sends:
    # Every send element with an integer value: op (completion else invocation), type and
    # process codes, key, offset (-1: unknown), value.
    op: np.ndarray
    typ: np.ndarray
    type_names: list[str]
    proc: np.ndarray
    proc_names: list[str | None]
    key: np.ndarray
    offset: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return len(self.op)

    @cached_property
    def acked(self) -> np.ndarray:
        """Rows of the acknowledged writes (ok, offset known), in history order."""
        ok = self.type_names.index("ok") if "ok" in self.type_names else -1
        return np.flatnonzero((self.typ == ok) & (self.offset >= 0))

    def ops_of(self, values: Iterable[int]) -> dict[int, int]:
        """value -> the op that sent it, for the `values` asked (the last one, were a value sent
        twice)."""
        rows = self._rows_of(values)
        return {int(self.value[r]): int(self.op[r]) for r in rows.tolist()}

    def op_of(self, value: int) -> OpRef | None:
        rows = self._rows_of([value])
        return self.ref(int(rows[-1])) if len(rows) else None

    def ref(self, row: int) -> OpRef:
        return OpRef(
            int(self.op[row]),
            self.type_names[int(self.typ[row])],
            self.proc_names[int(self.proc[row])],
        )

    def _rows_of(self, values: Iterable[int]) -> np.ndarray:
        wanted = np.fromiter(values, dtype=np.int64)
        if not len(wanted) or not len(self.value):
            return np.zeros(0, np.int64)
        return np.flatnonzero(np.isin(self.value, wanted))

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def from_parquet(cls, path: str | Path) -> Sends:
        """The send elements of a columnar history, one row group at a time, into arrays made
        once: the history's op row groups, and those of poll elements only (the final reads),
        are skipped by their statistics."""
        meta = pq.ParquetFile(path).metadata
        groups = [i for i in element_row_groups(path) if not _only_polls(meta.row_group(i))]
        bound = sum(meta.row_group(i).num_rows for i in groups)
        out = cls(
            np.empty(bound, np.int64),
            np.empty(bound, np.int8),
            [],
            np.empty(bound, np.int32),
            [],
            np.empty(bound, np.int64),
            np.empty(bound, np.int64),
            np.empty(bound, np.int64),
        )
        types, procs = _Names(), _Names()
        n = 0
        for i in groups:
            rg = read_element_row_group(path, i, ["kind", *COLUMNS])
            rg = rg.filter(
                pc.and_(pc.equal(rg.column("kind"), SEND), pc.is_valid(rg.column("value")))
            )
            m = rg.num_rows
            out.op[n : n + m] = _ints(rg, "index")
            out.typ[n : n + m] = types.codes(rg.column("type"))
            out.proc[n : n + m] = procs.codes(rg.column("process"))
            out.key[n : n + m] = _ints(rg, "key")
            out.offset[n : n + m] = _ints(rg, "offset")
            out.value[n : n + m] = _ints(rg, "value")
            n += m
        out.type_names = [str(t) for t in types.names]
        out.proc_names = procs.names
        if n < bound:  # poll elements were read past: the arrays hold only sends
            for name in ("op", "typ", "proc", "key", "offset", "value"):
                setattr(out, name, getattr(out, name)[:n].copy())
        # Arrow's allocator keeps what the row groups' decoding freed (about 150 MB at 6M
        # sends): handed back, not held through the rest of the check.
        pa.default_memory_pool().release_unused()
        return out

    @classmethod
    def from_rows(cls, op_rows: Iterable[dict[str, Any]]) -> Sends:
        """The same from op rows as dicts (`value`, or `value_json` as columnar rows hold it):
        an ok completion's sends with their offsets; every invocation's sends, named by its
        completion when it has one."""
        rows = list(op_rows)
        done = {r["invoke_index"]: r for r in rows if r.get("invoke_index") is not None}
        out: list[tuple[int, str, str | None, int, int, int]] = []
        for r in rows:
            if r.get("f") not in ("send", "txn"):
                continue
            if r.get("type") == "ok":
                for _, key, ov in send_mops(r):
                    if _is_pair(ov):
                        out.append((r["index"], "ok", _proc(r), key, ov[0], ov[1]))
            elif r.get("type") == "invoke":
                # Named by its completion, whatever its outcome; `info` when it never completed
                # (as the columnar history's element rows say).
                end = done.get(r["index"])
                index, typ = (r["index"], "info") if end is None else (end["index"], end["type"])
                for _, key, v in send_mops(r):
                    if is_int64(v):
                        out.append((index, typ, _proc(end or r), key, -1, v))
        type_names = sorted({t for _, t, *_ in out})
        proc_names = sorted({p for _, _, p, *_ in out}, key=str)
        return cls(
            np.array([o[0] for o in out], np.int64),
            np.array([type_names.index(o[1]) for o in out], np.int8),
            type_names,
            np.array([proc_names.index(o[2]) for o in out], np.int32),
            proc_names,
            np.array([o[3] for o in out], np.int64),
            np.array([o[4] for o in out], np.int64),
            np.array([o[5] for o in out], np.int64),
        )


def send_mops(op: dict[str, Any]) -> list[list[Any]]:
    """The send micro-ops of an op row (`value`, or `value_json` in columnar rows)."""
    value = op.get("value")
    if value is None and op.get("value_json") is not None:
        value = json.loads(op["value_json"])
    if not isinstance(value, list):
        return []
    return [m for m in value if isinstance(m, list) and len(m) == 3 and m[0] == "send"]


def _is_pair(ov: Any) -> bool:
    return isinstance(ov, list) and len(ov) == 2 and all(is_int64(x) for x in ov)


def _proc(row: dict[str, Any]) -> str | None:
    p = row.get("process")
    return None if p is None else str(p)


def _only_polls(rg: pq.RowGroupMetaData) -> bool:
    """Whether a row group's statistics say every row of it is a poll element."""
    for j in range(rg.num_columns):
        col = rg.column(j)
        if col.path_in_schema == "kind":
            st = col.statistics
            return bool(
                st is not None
                and st.has_min_max
                and st.null_count == 0
                and st.min == st.max == "poll"
            )
    return False


def _ints(table: pa.Table, column: str) -> np.ndarray:
    col = table.column(column)
    col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return np.asarray(col.fill_null(-1), dtype=np.int64)


class _Names:
    """Codes of one string column over many row groups, whose dictionaries differ."""

    def __init__(self) -> None:
        self.names: list[str | None] = []
        self._code: dict[str | None, int] = {}

    def _of(self, name: str | None) -> int:
        code = self._code.get(name)
        if code is None:
            code = self._code[name] = len(self.names)
            self.names.append(name)
        return code

    def codes(self, col: pa.ChunkedArray) -> np.ndarray:
        out = []
        for chunk in col.chunks:
            if not pa.types.is_dictionary(chunk.type):
                chunk = pc.dictionary_encode(chunk)
            local = np.array([self._of(n) for n in chunk.dictionary.to_pylist()] + [self._of(None)])
            idx = np.asarray(chunk.indices.fill_null(len(local) - 1), dtype=np.int64)
            out.append(local[idx])
        return np.concatenate(out) if out else np.zeros(0, np.int64)
