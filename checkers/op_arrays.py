"""Queue ops as integer columns for the cycle search: who ran them and when, without objects.

`complete_time` is -1 where the op never completed or is info (it may take effect any time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from checkers.queue.arrays import _codes, _ints, _is

if TYPE_CHECKING:
    from checkers.cycles import OpInfo


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
        from checkers.cycles import OpInfo

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
    index, _ = _ints(table.column("index"))
    inv, has_inv = _ints(table.column("invoke_index"))
    time, _ = _ints(table.column("time"))
    typ, type_names = _codes(table.column("type"))
    proc, proc_names = _codes(table.column("process"))
    is_invoke = _is(typ, type_names, "invoke")
    completes = ~is_invoke
    # Invocations that never completed count as info ops of their own.
    in_order = len(index) < 2 or bool(np.all(index[1:] > index[:-1]))
    done_invokes, inv_pos = _invocations(index, inv, completes, has_inv, in_order)
    pending = is_invoke & ~done_invokes
    info_code = type_names.index("info") if "info" in type_names else len(type_names)
    if info_code == len(type_names):
        type_names = [*type_names, "info"]
    done = np.flatnonzero(completes)
    c_time = time[done]
    c_time[typ[done] == info_code] = -1
    parts = [
        index[done], proc[done], typ[done], time[inv_pos], c_time,
    ]  # fmt: skip
    if pending.any():
        wait = np.flatnonzero(pending)
        extra = [
            index[wait], proc[wait], np.full(len(wait), info_code, dtype=typ.dtype),
            time[wait], np.full(len(wait), -1, dtype=np.int64),
        ]  # fmt: skip
        parts = [np.concatenate([p, e]) for p, e in zip(parts, extra, strict=True)]
    if not in_order or pending.any():
        order = np.argsort(parts[0], kind="stable")
        parts = [p[order] for p in parts]
    out_index, out_proc, out_typ, invoke_time, complete_time = parts
    return OpArrays(
        out_index, out_proc, proc_names, out_typ, type_names, invoke_time, complete_time
    )


def _invocations(
    index: np.ndarray, inv: np.ndarray, completes: np.ndarray, has_inv: np.ndarray, in_order: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(which rows are invocations some completion names, the row of each completion's
    invocation). History indices are dense, so a table from index to row does it without a
    sort; otherwise a sort and searchsorted."""
    n = len(index)
    if n and int(index.max()) - int(index.min()) < 4 * n + 1024:
        lo = int(index.min())
        row_of = np.full(int(index.max()) - lo + 1, -1, dtype=np.int64)
        row_of[index - lo] = np.arange(n)
        q = inv[completes] - lo
        inside = (q >= 0) & (q < len(row_of))
        inv_pos = np.full(len(q), -1, dtype=np.int64)
        inv_pos[inside] = row_of[q[inside]]
        if np.all(inv_pos >= 0):
            done = np.zeros(n, dtype=bool)
            done[inv_pos[has_inv[completes]]] = True
            return done, inv_pos
    by_index = np.arange(n) if in_order else np.argsort(index, kind="stable")
    sorted_index = index if in_order else index[by_index]
    done = np.zeros(n, dtype=bool)
    done[by_index] = _hits(sorted_index, inv[completes & has_inv])
    return done, by_index[np.searchsorted(sorted_index, inv[completes])]


def _hits(sorted_q: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """sorted_q[i] in ref, for sorted_q ascending and unique."""
    hit = np.zeros(len(sorted_q), dtype=bool)
    if len(sorted_q) and len(ref):
        pos = np.minimum(np.searchsorted(sorted_q, ref), len(sorted_q) - 1)
        hit[pos[sorted_q[pos] == ref]] = True
    return hit
