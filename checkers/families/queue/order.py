"""What the two order rule families (rules/internal_order.py, rules/process_order.py) share:
"b should sit right after a in the key's log", its wording, and its test over arrays.

Both forms word a finding through `order_pair` over a LogView: key_log.KeyLog is one, and
logs.KeyView answers the same from the arrays, so the texts are identical by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from checkers.core.findings import Finding
from checkers.families.queue.elem import Elem
from checkers.families.queue.logs import Logs


class LogView(Protocol):
    """What wording an order anomaly needs from a key's version order."""

    key: int

    def pos(self, e: Elem) -> int | None: ...

    def between(self, r1: int, r2: int) -> Sequence[tuple[int, list[int]]]: ...


# A rule family's wording of one pair: (log, "poll" or "send", a, b) -> finding or None.
PairWording = Callable[[LogView, str, Elem, Elem], Finding | None]


def _describe_skipped(skipped: Sequence[tuple[int, list[int]]], limit: int = 8) -> str:
    shown = ", ".join(f"{o} (value {'/'.join(map(str, vs))})" for o, vs in skipped[:limit])
    more = f" and {len(skipped) - limit} more" if len(skipped) > limit else ""
    return f"offsets {shown}{more}"


def where(e: Elem) -> str:
    """Where an element sits, as a finding says it."""
    return f"offset {e.offset} (value {e.value})" if e.offset is not None else f"value {e.value}"


def order_pair(
    log: LogView,
    a: Elem,
    b: Elem,
    ops: tuple[int, ...],
    head: str,
    kinds: tuple[str | None, str],
    rule: str,
) -> Finding | None:
    """b should sit right after a in the log: a skip (kinds[0], if any is checked) or going
    back (kinds[1]); `head` says where a and b come from, `rule` why going back is wrong."""
    pa, pb = log.pos(a), log.pos(b)
    if pa is None or pb is None:
        return None
    delta = pb - pa
    skip_kind, back_kind = kinds
    if skip_kind is not None and delta > 1:
        skipped = log.between(pa, pb)
        text = f"{head}, skipping {len(skipped)} record(s) in between: {_describe_skipped(skipped)}"
        data = {"values": [a.value, b.value], "delta": delta}
        return Finding(skip_kind, log.key, ops, text, data)
    if delta < 1:
        place = "the same place" if delta == 0 else "earlier"
        return Finding(
            back_kind,
            log.key,
            ops,
            f"{head}, {place} in the log: {rule}",
            {"values": [a.value, b.value], "delta": delta},
        )
    return None


def out_of_order(logs: Logs, first: np.ndarray, second: np.ndarray, skip: bool) -> np.ndarray:
    """Which pairs (element rows first[j] then second[j]) are not adjacent in their key's log:
    second at or before first, or (`skip`) more than one place after it."""
    pa, pb = logs.pos[first], logs.pos[second]
    d = pb - pa
    bad = d < 1
    if skip:
        bad |= d > 1
    return (pa >= 0) & (pb >= 0) & bad


def describe_pairs(
    logs: Logs, kind: str, first: np.ndarray, second: np.ndarray, wording: PairWording
) -> list[Finding]:
    """The findings of the flagged pairs (element rows), worded as the reference words them."""
    out = []
    for i, j in zip(first.tolist(), second.tolist(), strict=True):
        ea, eb = logs.a.elem(i), logs.a.elem(j)
        found = wording(logs.key_view(int(logs.kid[i]), {id(ea): i, id(eb): j}), kind, ea, eb)
        if found is not None:
            out.append(found)
    return out
