"""The reference path: the per-key checks in plain Python over an Arrow table of elements."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from checkers.queue.context import QueueContext, build_context
from checkers.queue.per_key import KeyResult, check_key, elems_from_columns


def local_context(
    cols: dict[str, list[Any]],
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
) -> QueueContext:
    """`cols`: element columns (pa.Table.to_pydict); `slots`: QueueContext.slots."""
    kind, typ, index, value = cols["kind"], cols["type"], cols["index"], cols["value"]
    info = [
        (index[i], value[i])
        for i in range(len(kind))
        if kind[i] == "send" and typ[i] == "info" and value[i] is not None
    ]
    wanted = {v for _, v in info}
    polled = [v for k, v in zip(kind, value, strict=True) if k == "poll" and v in wanted]
    return build_context(info, polled, resets, slots)


def run_local(
    elements: pa.Table,
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
) -> tuple[list[KeyResult], QueueContext]:
    cols = elements.to_pydict()
    ctx = local_context(cols, resets, slots)
    rows: dict[int, list[int]] = defaultdict(list)
    for i, k in enumerate(cols["key"]):
        rows[k].append(i)
    results = [check_key(k, elems_from_columns(cols, rows[k]), ctx) for k in sorted(rows)]
    return results, ctx
