"""One element row of the columnar history as a Python object: the reference path's unit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

OK, INFO, FAIL = "ok", "info", "fail"


@dataclass(frozen=True)
class Elem:
    """One element row of the columnar history (history.columnar.ELEMENT_COLUMNS)."""

    index: int
    type: str
    process: str
    time: int | None
    seq: int
    kind: str
    offset: int | None
    value: int | None
    rebalanced: bool
    # Pipelined sends only (docs/history.md): the producer instance, and the invocation's index,
    # whose order is that producer's send order. None where the history has no producers.
    producer: int | None = None
    invoke_index: int | None = None


def _opt_int(x: Any) -> int | None:
    # Arrow nulls arrive as None; through pandas, nullable ints arrive as float NaN.
    return None if x is None or x != x else int(x)


def elems_from_columns(cols: dict[str, list[Any]], rows: Iterable[int] | None = None) -> list[Elem]:
    """Elements from column lists (rows: which positions, default all), in op and read order.
    `producer` and `invoke_index` are read when `cols` has a `producer` column."""
    idx, typ, proc, tim = cols["index"], cols["type"], cols["process"], cols["time"]
    seq, kind, off, val, reb = (
        cols["seq"], cols["kind"], cols["offset"], cols["value"], cols["rebalanced"],
    )  # fmt: skip
    prod = cols.get("producer")
    inv = cols["invoke_index"] if prod is not None else None
    out = [
        Elem(
            int(idx[i]),
            str(typ[i]),
            str(proc[i]),
            _opt_int(tim[i]),
            int(seq[i]),
            str(kind[i]),
            _opt_int(off[i]),
            _opt_int(val[i]),
            reb[i] is True or reb[i] == 1,
            None if prod is None else _opt_int(prod[i]),
            None if inv is None else _opt_int(inv[i]),
        )
        for i in (range(len(idx)) if rows is None else rows)
    ]
    out.sort(key=lambda e: (e.index, e.seq))
    return out
