"""Queue ops as integer columns for the cycle search: who ran them and when, without objects.

`complete_time` is -1 where the op never completed or is info (it may take effect any time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from checkers.scan.columns import CodeBook, fixed_width, is_name


@dataclass(frozen=True)
class OpInfo:
    """One queue op as the cycle search explains it."""

    index: int
    process: str
    type: str
    invoke_time: int
    complete_time: int | None  # None: never completed, or info (may take effect any time)


@dataclass(frozen=True)
class OpArrays:
    index: np.ndarray
    proc: np.ndarray
    proc_names: list[str | None]
    typ: np.ndarray
    type_names: list[str | None]
    invoke_time: np.ndarray
    complete_time: np.ndarray  # -1: None

    def __len__(self) -> int:
        return len(self.index)

    @staticmethod
    def from_infos(ops: list[OpInfo]) -> OpArrays:
        procs = sorted({o.process for o in ops})
        types = sorted({o.type for o in ops})
        return OpArrays(
            np.array([o.index for o in ops], dtype=np.int64),
            np.array([procs.index(o.process) for o in ops], dtype=np.int32),
            list(procs),
            np.array([types.index(o.type) for o in ops], dtype=np.int32),
            list(types),
            np.array([o.invoke_time for o in ops], dtype=np.int64),
            np.array([-1 if o.complete_time is None else o.complete_time for o in ops], np.int64),
        )

    def rows_of(self, index: np.ndarray) -> np.ndarray:
        """The row of each op index; -1 where none."""
        if not len(self.index):
            return np.full(len(index), -1, np.int64)
        order = np.argsort(self.index, kind="stable")
        at = np.minimum(np.searchsorted(self.index, index, sorter=order), len(order) - 1)
        j = order[at]
        return np.where(self.index[j] == index, j, -1)

    def infos(self, rows: np.ndarray) -> list[OpInfo]:
        """Rows as objects: only for the ops inside a window the search looks at."""
        return [
            OpInfo(
                int(self.index[i]),
                str(self.proc_names[self.proc[i]]),
                str(self.type_names[self.typ[i]]),
                int(self.invoke_time[i]),
                None if self.complete_time[i] < 0 else int(self.complete_time[i]),
            )
            for i in rows.tolist()
        ]


def op_arrays(table: pa.Table) -> OpArrays:
    """From queue op rows (index, invoke_index, type, process, time); as cycles.op_infos."""
    build = OpArraysBuilder(table.num_rows)
    build.add(table)
    return build.finish()


class OpArraysBuilder:
    """Queue op rows arriving part by part (history.columnar.check_parts), split as they come
    into invocations and completions and decoded into preallocated columns: no part is kept in
    Arrow form, and the completions' columns become the result without a copy. `capacity`:
    an upper bound on the rows to come (more are taken, at the cost of a copy); pages never
    written are never touched, so a loose bound is free. A completion keeps the index of its
    invocation only when it was not found in its own part (few): at 100M ops that column
    alone was 800 MB."""

    def __init__(self, capacity: int) -> None:
        self._invokes = _Columns(capacity, index=np.int64, time=np.int64, proc=np.int32, done=bool)
        self._completes = _Columns(
            capacity, index=np.int64, time=np.int64, typ=np.int32, proc=np.int32, inv_time=np.int64
        )
        # Completions whose invocation was not in their part: their rows and invocations.
        self._late_rows: list[np.ndarray] = []
        self._late_inv: list[np.ndarray] = []
        self._types, self._procs = CodeBook(), CodeBook()
        self._sorted = True  # invocations so far in ascending index order (file order)

    def add(self, part: pa.Table) -> None:
        typ = self._types.encode(part.column("type"))
        is_invoke = is_name(typ, self._types.names, "invoke")
        index = fixed_width(part.column("index"), np.int64)[0]
        time = fixed_width(part.column("time"), np.int64)[0]
        proc = self._procs.encode(part.column("process"))
        inv, has_inv = fixed_width(part.column("invoke_index"), np.int64)
        if has_inv is not None:
            inv = np.where(has_inv, inv, -1)  # a completion naming no invocation
        i_lo, c_lo = len(self._invokes), len(self._completes)
        self._invokes.append(is_invoke, index=index, time=time, proc=proc)
        self._completes.append(~is_invoke, index=index, time=time, typ=typ, proc=proc)
        self._match(i_lo, c_lo, inv[~is_invoke])

    def _match(self, i_lo: int, c_lo: int, inv: np.ndarray) -> None:
        """Each new completion's invocation (`inv`), looked up among this part's invocations
        (nearly all of them are there): a part-sized binary search instead of a table over
        every index of the history (at 10M ops, 180 MB of fresh pages). The others wait for
        `finish`."""
        i, c = self._invokes.cols, self._completes.cols
        i_hi, c_hi = len(self._invokes), len(self._completes)
        i["done"][i_lo:i_hi] = False
        ix = i["index"][i_lo:i_hi]
        if self._sorted and len(ix):
            ahead = i_lo == 0 or int(ix[0]) > int(i["index"][i_lo - 1])
            self._sorted = ahead and bool(np.all(ix[1:] > ix[:-1]))
        if not self._sorted or i_hi == i_lo or c_hi == c_lo:
            self._late(np.arange(c_lo, c_hi), inv)
            return
        hit, at = _positions(ix, inv)
        at += i_lo
        np.copyto(c["inv_time"][c_lo:c_hi], i["time"][at], where=hit)
        i["done"][at[hit]] = True
        missed = np.flatnonzero(~hit)
        self._late(c_lo + missed, inv[missed])

    def _late(self, rows: np.ndarray, inv: np.ndarray) -> None:
        if len(rows):
            self._late_rows.append(rows)
            self._late_inv.append(inv)

    def finish(self) -> OpArrays:
        i, c = self._invokes.filled(), self._completes.filled()
        del self._invokes, self._completes
        type_names = self._types.names
        if "info" not in type_names:
            type_names = [*type_names, "info"]
        info = type_names.index("info")
        # A completion whose invocation is not in the history may have been invoked at any
        # time before it: the earliest time puts no realtime edge into it that could be false.
        earliest = min((int(t.min()) for t in (i["time"], c["time"]) if len(t)), default=0)
        invoke_time, done = c["inv_time"], i["done"]
        if self._late_rows:
            # Invocations in an earlier part than their completion (few when the invocations
            # come in index order, looked up in all of them), or every completion when not.
            late = np.concatenate(self._late_rows)
            wanted = np.concatenate(self._late_inv)
            if self._sorted:
                found, at = _positions(i["index"], wanted)
                invoke_time[late] = earliest
                invoke_time[late[found]] = i["time"][at[found]]
                done[at[found]] = True
            else:
                invoke_time[late], asked = _invocations(i["index"], i["time"], wanted, earliest)
                done |= asked
        complete_time = c["time"]
        complete_time[c["typ"] == info] = -1
        cols = {
            "index": c["index"], "proc": c["proc"], "typ": c["typ"],
            "invoke_time": invoke_time, "complete_time": complete_time,
        }  # fmt: skip
        del c
        # Invocations that never completed count as info ops of their own: few, put in index
        # order among the completions one column at a time (a concatenation and a sort of every
        # column at once held the op arrays three times over).
        wait = np.flatnonzero(~done)
        waiting = {
            "index": i["index"][wait], "proc": i["proc"][wait],
            "typ": np.full(len(wait), info, dtype=cols["typ"].dtype),
            "invoke_time": i["time"][wait], "complete_time": np.full(len(wait), -1, np.int64),
        }  # fmt: skip
        del i, done, wait
        _merge_in_order(cols, waiting)
        return OpArrays(
            cols["index"], cols["proc"], self._procs.names, cols["typ"], type_names,
            cols["invoke_time"], cols["complete_time"],
        )  # fmt: skip


def _merge_in_order(cols: dict[str, np.ndarray], more: dict[str, np.ndarray]) -> None:
    """`more`'s rows among `cols`' (same names), every column ordered by `index` (stable: `cols`'
    rows before `more`'s at an equal index), in place of `cols`' columns, one at a time."""
    index = cols["index"]
    if len(more["index"]):
        if len(index) > 1 and not bool(np.all(index[1:] > index[:-1])):
            for name in cols:
                cols[name] = np.concatenate([cols[name], more[name]])
        else:
            at = np.searchsorted(index, more["index"], side="right")
            for name in cols:
                cols[name] = np.insert(cols[name], at, more[name])
    index = cols["index"]
    if len(index) > 1 and not bool(np.all(index[1:] > index[:-1])):
        order = np.argsort(index, kind="stable")
        for name in cols:
            cols[name] = cols[name][order]


def _positions(sorted_index: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, position) of each of `q` in an ascending array."""
    if len(sorted_index) == 0:
        return np.zeros(len(q), dtype=bool), np.zeros(len(q), dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_index, q), len(sorted_index) - 1)
    return sorted_index[at] == q, at


class _Columns:
    """Named columns of one length, appended to in parts, with room for `capacity` rows."""

    def __init__(self, capacity: int, **dtypes: type) -> None:
        self._n = 0
        self._cols = {name: np.empty(capacity, dtype) for name, dtype in dtypes.items()}

    def __len__(self) -> int:
        return self._n

    @property
    def cols(self) -> dict[str, np.ndarray]:
        """The columns at full capacity; rows past len(self) are not yet filled."""
        return self._cols

    def append(self, rows: np.ndarray, **parts: np.ndarray) -> None:
        """The rows of `parts` where `rows` (a mask) holds, each column taken straight into its
        place. The positions are found once for all columns, and taken with mode="clip":
        np.compress finds them again per column, and np.take's default mode writes to a
        temporary copy of `out` first (a fresh part-sized array per column)."""
        at = np.flatnonzero(rows)
        lo = self._n
        hi = lo + len(at)
        for name, col in self._cols.items():
            if hi > len(col):
                grown = np.empty(max(hi, 2 * len(col)), col.dtype)
                grown[:lo] = col[:lo]
                self._cols[name] = col = grown
            if name in parts:  # the others are the caller's to fill
                np.take(parts[name], at, out=col[lo:hi], mode="clip")
        self._n = hi

    def filled(self) -> dict[str, np.ndarray]:
        return {name: col[: self._n] for name, col in self._cols.items()}


def _invocations(
    index: np.ndarray, time: np.ndarray, wanted: np.ndarray, missing: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the time of each `wanted` invocation, `missing` where it is not in `index`; which of
    `index` are wanted). History indices are dense, so a table from index to time answers
    with one gather and no sort (the queries come nearly in order, so the gather streams);
    otherwise a sort and searchsorted."""
    if len(index) == 0:
        return np.full(len(wanted), missing, dtype=np.int64), np.zeros(0, dtype=bool)
    lo, hi = int(index.min()), int(index.max())
    if hi - lo < 4 * len(index) + 1024:
        q = wanted - lo if lo else wanted
        inside = (q >= 0) & (q <= hi - lo)
        if not inside.all():
            q = np.where(inside, q, hi - lo + 1)  # one slot past the table's rows: missing
        time_of = np.full(hi - lo + 2, missing, dtype=np.int64)
        time_of[index - lo if lo else index] = time
        asked = np.zeros(hi - lo + 2, dtype=bool)
        asked[q] = True
        return time_of[q], asked[index - lo if lo else index]
    order = np.argsort(index, kind="stable")
    hit, at = _positions(index[order], wanted)
    found = order[at[hit]]
    out = np.full(len(wanted), missing, dtype=np.int64)
    out[hit] = time[found]
    asked = np.zeros(len(index), dtype=bool)
    asked[found] = True
    return out, asked
