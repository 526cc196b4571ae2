"""Synthetic valid queue histories of any size, built as columns (no JSONL round trip).

P processes each own one key and repeat: send, send, poll (reading those two records).
Op j (global, in time order) is run by process j % P; ops do not overlap in time. The value
of each op row (`value_json`) is left null: the checkers never read it for queue ops.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history.columnar import SCHEMA, op_rows

STEP_NS = 100


def synthetic_table(n_ops: int, processes: int = 64) -> pa.Table:
    per = max(3, n_ops // processes // 3 * 3)
    n = per * processes
    j = np.arange(n, dtype=np.int64)
    p, s = j % processes, j // processes
    is_poll = s % 3 == 2
    invoke_index, complete_index = 2 * j, 2 * j + 1
    invoke_time, complete_time = j * STEP_NS, j * STEP_NS + STEP_NS // 2
    f = np.where(is_poll, "poll", "send")
    proc = p.astype(str)

    ops = {
        "row": np.full(2 * n, "op"),
        "index": np.arange(2 * n, dtype=np.int64),
        "invoke_index": np.ravel(np.column_stack([np.full(n, -1), invoke_index])),
        "type": np.ravel(np.column_stack([np.full(n, "invoke"), np.full(n, "ok")])),
        "f": np.repeat(f, 2),
        "process": np.repeat(proc, 2),
        "time": np.ravel(np.column_stack([invoke_time, complete_time])),
    }
    ops_table = _table(ops, null_invoke_index=True)

    value = p * per + s
    send_no = (s // 3) * 2 + (s % 3)
    sends = ~is_poll
    # Each poll reads the two records its process just sent.
    pj = j[is_poll]
    elem = {
        "index": np.concatenate([complete_index[sends], np.repeat(2 * pj + 1, 2)]),
        "invoke_index": np.concatenate([invoke_index[sends], np.repeat(2 * pj, 2)]),
        "type": "ok",
        "f": np.concatenate([f[sends], np.full(2 * len(pj), "poll")]),
        "process": np.concatenate([proc[sends], np.repeat(proc[is_poll], 2)]),
        "time": np.concatenate([complete_time[sends], np.repeat(complete_time[is_poll], 2)]),
        "invoke_time": np.concatenate([invoke_time[sends], np.repeat(invoke_time[is_poll], 2)]),
        "mop": 0,
        "seq": np.concatenate([np.zeros(sends.sum()), np.tile([0, 1], len(pj))]),
        "kind": np.concatenate([np.full(sends.sum(), "send"), np.full(2 * len(pj), "poll")]),
        "key": np.concatenate([p[sends], np.repeat(p[is_poll], 2)]),
        "offset": np.concatenate(
            [
                send_no[sends],
                np.ravel(np.column_stack([send_no[is_poll] - 2, send_no[is_poll] - 1])),
            ]
        ),
        "value": np.concatenate(
            [value[sends], np.ravel(np.column_stack([value[is_poll] - 2, value[is_poll] - 1]))]
        ),
        "rebalanced": False,
    }
    n_elem = len(elem["index"])
    elem = {k: (np.full(n_elem, v) if np.isscalar(v) else v) for k, v in elem.items()}
    elem["row"] = np.full(n_elem, "elem")
    order = np.lexsort((elem["seq"], elem["index"]))
    elem = {k: v[order] for k, v in elem.items()}
    return pa.concat_tables([ops_table, _table(elem)])


def _table(cols: dict[str, np.ndarray], null_invoke_index: bool = False) -> pa.Table:
    n = len(next(iter(cols.values())))
    arrays = []
    for field in SCHEMA:
        if field.name in cols:
            data = cols[field.name]
            mask = (data < 0) if (field.name == "invoke_index" and null_invoke_index) else None
            arr = pa.array(data, mask=mask, type=field.type.value_type
                           if pa.types.is_dictionary(field.type) else field.type)  # fmt: skip
            if pa.types.is_dictionary(field.type):
                arr = arr.dictionary_encode().cast(field.type)
        else:
            arr = pa.nulls(n, type=field.type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def write_synthetic(path: str | Path, n_ops: int) -> int:
    """Writes history.parquet with about n_ops operations; returns the exact count."""
    table = synthetic_table(n_ops)
    pq.write_table(table, path, row_group_size=1 << 20)
    ok_ops = pc.equal(op_rows(table).column("type").cast(pa.string()), "ok")
    return int(pc.sum(ok_ops).as_py())
