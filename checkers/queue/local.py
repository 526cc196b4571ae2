"""The reference path: the per-key checks in plain Python over an Arrow table of elements."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from checkers.queue.context import QueueContext, build_context
from checkers.queue.per_key import KeyResult, check_key, elems_from_columns
from history.format import UNDECLARED


def local_context(
    cols: dict[str, list[Any]],
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> QueueContext:
    """`cols`: element columns (pa.Table.to_pydict); `slots`, `after_abort`: QueueContext's."""
    kind, typ, index, key, value = (
        cols["kind"], cols["type"], cols["index"], cols["key"], cols["value"],
    )  # fmt: skip
    info = [
        (index[i], key[i], value[i])
        for i in range(len(kind))
        if kind[i] == "send" and typ[i] == "info" and value[i] is not None
    ]
    polled = [(key[i], value[i]) for i in range(len(kind)) if kind[i] == "poll"]
    return build_context(info, polled, resets, slots, after_abort)


def run_local(
    elements: pa.Table,
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> tuple[list[KeyResult], QueueContext]:
    cols = elements.to_pydict()
    ctx = local_context(cols, resets, slots, after_abort)
    rows: dict[int, list[int]] = defaultdict(list)
    for i, k in enumerate(cols["key"]):
        rows[k].append(i)
    results = [check_key(k, elems_from_columns(cols, rows[k]), ctx) for k in sorted(rows)]
    return results, ctx
