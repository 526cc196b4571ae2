"""Queue ops as integer columns for the cycle search: who ran them and when, without objects.

`complete_time` is -1 where the op never completed or is info (it may take effect any time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from checkers.columns import CodeBook, fixed_width, is_name


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
    written are never touched, so a loose bound is free."""

    def __init__(self, capacity: int) -> None:
        self._invokes = _Columns(capacity, index=np.int64, time=np.int64, proc=np.int32, done=bool)
        self._completes = _Columns(
            capacity, index=np.int64, inv=np.int64, time=np.int64, typ=np.int32, proc=np.int32,
            inv_time=np.int64, found=bool,
        )  # fmt: skip
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
        self._completes.append(~is_invoke, index=index, inv=inv, time=time, typ=typ, proc=proc)
        self._match(i_lo, c_lo)

    def _match(self, i_lo: int, c_lo: int) -> None:
        """Each new completion's invocation, looked up among this part's invocations (nearly
        all of them are there): a part-sized binary search instead of a table over every index
        of the history (at 10M ops, 180 MB of fresh pages)."""
        i, c = self._invokes.cols, self._completes.cols
        i_hi, c_hi = len(self._invokes), len(self._completes)
        i["done"][i_lo:i_hi] = False
        c["found"][c_lo:c_hi] = False
        ix = i["index"][i_lo:i_hi]
        if self._sorted and len(ix):
            ahead = i_lo == 0 or int(ix[0]) > int(i["index"][i_lo - 1])
            self._sorted = ahead and bool(np.all(ix[1:] > ix[:-1]))
        if not self._sorted or i_hi == i_lo or c_hi == c_lo:
            return
        hit, at = _positions(ix, c["inv"][c_lo:c_hi])
        at += i_lo
        c["found"][c_lo:c_hi] = hit
        np.copyto(c["inv_time"][c_lo:c_hi], i["time"][at], where=hit)
        i["done"][at[hit]] = True

    def finish(self) -> OpArrays:
        i, c = self._invokes.filled(), self._completes.filled()
        type_names = self._types.names
        if "info" not in type_names:
            type_names = [*type_names, "info"]
        info = type_names.index("info")
        # A completion whose invocation is not in the history may have been invoked at any
        # time before it: the earliest time puts no realtime edge into it that could be false.
        earliest = min((int(t.min()) for t in (i["time"], c["time"]) if len(t)), default=0)
        if self._sorted:
            invoke_time, done = c["inv_time"], i["done"]
            # Invocations in an earlier part than their completion: few, looked up in all.
            late = np.flatnonzero(~c["found"])
            found, at = _positions(i["index"], c["inv"][late])
            invoke_time[late] = earliest
            invoke_time[late[found]] = i["time"][at[found]]
            done[at[found]] = True
        else:
            invoke_time, done = _invocations(i["index"], i["time"], c["inv"], earliest)
        complete_time = c["time"]
        complete_time[c["typ"] == info] = -1
        index, proc, typ = c["index"], c["proc"], c["typ"]
        # Invocations that never completed count as info ops of their own.
        if not done.all():
            wait = np.flatnonzero(~done)
            index = np.concatenate([index, i["index"][wait]])
            proc = np.concatenate([proc, i["proc"][wait]])
            typ = np.concatenate([typ, np.full(len(wait), info, dtype=typ.dtype)])
            invoke_time = np.concatenate([invoke_time, i["time"][wait]])
            complete_time = np.concatenate([complete_time, np.full(len(wait), -1, np.int64)])
        if len(index) > 1 and not bool(np.all(index[1:] > index[:-1])):
            order = np.argsort(index, kind="stable")
            index, proc, typ = index[order], proc[order], typ[order]
            invoke_time, complete_time = invoke_time[order], complete_time[order]
        return OpArrays(index, proc, self._procs.names, typ, type_names, invoke_time, complete_time)


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
