"""One key's version order in plain Python: what every rule's reference form reads.

- The version order of a key comes from offsets: every [offset, value] any poll returned (polls
  are always safe data, whatever became of their op), and the offsets of sends that certainly
  happened (ok, or info with some send of the same op seen by a poll). Offsets are not dense:
  transaction markers take offsets no poll returns, so positions are ranks among the offsets
  known to hold a value.
- Where an element has an offset we place it by that offset; otherwise by the value's first
  place in the log. (Jepsen places by value only; with duplicates, by offset is the exact one.)

logs.Logs holds the same for many keys at once as arrays, for the rules' vectorised forms.
"""

from __future__ import annotations

from collections import defaultdict

from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import INFO, OK, Elem


class KeyLog:
    """The version order of one key, with who showed each [offset, value], and the key's
    elements in op and read order (`elems`)."""

    def __init__(self, key: int, elems: list[Elem], ctx: QueueContext) -> None:
        self.key = key
        self.elems = elems
        self.committed_info = ctx.committed_info
        self.writer: dict[int, Elem] = {}
        for e in elems:
            if e.kind == "send" and e.value is not None:
                self.writer.setdefault(e.value, e)
        # offset -> value -> ops that showed it there (sends first, then polls, index order)
        self.at: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for e in elems:
            if e.offset is None or e.value is None:
                continue
            if e.kind == "poll" or self.committed(e):
                shown = self.at[e.offset][e.value]
                if e.index not in shown:
                    shown.append(e.index)
        self.offsets = sorted(self.at)
        self.rank = {o: i for i, o in enumerate(self.offsets)}
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        for o in self.offsets:
            for v in self.at[o]:
                self.first.setdefault(v, self.rank[o])
                self.last[v] = self.rank[o]

    def committed(self, e: Elem) -> bool:
        """Did this send certainly happen: ok, or info with a send of its op polled?"""
        return e.type == OK or (e.type == INFO and e.index in self.committed_info)

    def pos(self, e: Elem) -> int | None:
        if e.offset is not None and e.offset in self.rank:
            return self.rank[e.offset]
        return None if e.value is None else self.first.get(e.value)

    def values_at(self, rank: int) -> list[int]:
        return sorted(self.at[self.offsets[rank]])

    def between(self, r1: int, r2: int) -> list[tuple[int, list[int]]]:
        return [(self.offsets[r], self.values_at(r)) for r in range(r1 + 1, r2)]

    def by_op(self, kind: str) -> dict[int, list[Elem]]:
        """The key's `kind` ("poll" or "send") elements with a value, by op index."""
        ops: dict[int, list[Elem]] = defaultdict(list)
        for e in self.elems:
            if e.kind == kind and e.value is not None:
                ops[e.index].append(e)
        return ops
