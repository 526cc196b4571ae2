"""The version order of many keys at once as arrays: what every rule's vectorised form reads.

Same content as key_log.KeyLog, for every key of a batch: elements sorted once by
(key, index, seq), each fact of KeyLog one sort/diff/searchsorted pass over all of them.
Pairs (key, value) and (key, offset) become single int64s through dense ids: `kid * NV + vid`
with NV the number of distinct values; lookups go through `npsets.IdIndex`, a table indexed by
the id (or by vid, when the pair space is too large), not a binary search.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from checkers.families.queue.arrays import ElemArrays
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import FAIL, INFO, OK, Elem
from checkers.scan.npsets import IdIndex, dense_ids, member, sort_rows


def take(rows: np.ndarray, j: np.ndarray) -> np.ndarray:
    """rows[j], -1 where j is -1."""
    if len(rows) == 0:
        return np.full(len(j), -1, dtype=np.int64)
    return np.where(j >= 0, rows[np.maximum(j, 0)], -1)


def runs(*cols: np.ndarray) -> np.ndarray:
    """Start positions of runs of equal rows in the columns `cols`."""
    if len(cols[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(len(cols[0]) - 1, dtype=bool)
    for x in cols:
        change |= x[1:] != x[:-1]
    return np.flatnonzero(np.r_[True, change])


class Logs:
    """The version order of every key at once: offsets holding a value, ranked per key."""

    def __init__(self, a: ElemArrays, ctx: QueueContext) -> None:
        n = len(a)
        self.a = a
        self.kid = np.zeros(n, dtype=np.int64)
        if n:
            self.kid[1:] = np.cumsum(a.key[1:] != a.key[:-1])
        self.keys = a.key[runs(a.key)]
        self.vals_u, vid = dense_ids(a.value, a.has_val)
        self.offs_u, oid = dense_ids(a.offset, a.has_off)
        nv, no = max(len(self.vals_u), 1), max(len(self.offs_u), 1)
        self.nv = nv
        nk = max(len(self.keys), 1)
        self.kv_space, self.ko_space = nk * nv, nk * no
        self.oid = np.where(a.has_off, oid, -1)
        self.kv = np.where(a.has_val, self.kid * nv + vid, -1)
        self.ko = np.where(a.has_off, self.kid * no + oid, -1)
        self.is_ok, self.is_info, self.is_fail = (a.is_type(t) for t in (OK, INFO, FAIL))
        self.poll, self.send = a.is_kind("poll"), a.is_kind("send")
        happened = np.fromiter(ctx.committed_info, dtype=np.int64, count=len(ctx.committed_info))
        self.committed = self.is_ok | (self.is_info & member(a.index, happened))

        # writer: the first send of each (key, value), in op order.
        ws = np.flatnonzero(self.send & a.has_val)
        ws = ws[np.argsort(self.kv[ws], kind="stable")]
        first = runs(self.kv[ws])
        self.w_kv, self.w_row = self.kv[ws][first], ws[first]
        self.w_index = self.kv_index(self.w_kv)

        # at: distinct (key, offset, value) shown by a poll or a send that certainly happened.
        shown = np.flatnonzero(a.has_off & a.has_val & (self.poll | self.committed))
        shown = shown[sort_rows(self.ko[shown], self.kv[shown])]  # ties: row order
        self.shown = shown
        s_ko, s_kv = self.ko[shown], self.kv[shown]
        new_t = np.r_[True, (s_ko[1:] != s_ko[:-1]) | (s_kv[1:] != s_kv[:-1])] if len(shown) else []
        t_start = np.flatnonzero(new_t)
        self.t_start = t_start  # triple t is shown[t_start[t]:t_start[t+1]]
        self.t_ko, self.t_kv = s_ko[t_start], s_kv[t_start]
        g_first_t = runs(self.t_ko)
        self.g_ko = self.t_ko[g_first_t]
        self.g_first_t = g_first_t
        self.t_group = np.cumsum(np.r_[True, self.t_ko[1:] != self.t_ko[:-1]])[: len(t_start)] - 1
        self.g_kid = self.kid[shown[t_start[g_first_t]]] if len(shown) else np.zeros(0, np.int64)
        self.g_off = a.offset[shown[t_start[g_first_t]]] if len(shown) else np.zeros(0, np.int64)
        self.k_first_g = np.searchsorted(self.g_kid, np.arange(len(self.keys)))
        self.g_rank = np.arange(len(self.g_ko)) - self.k_first_g[self.g_kid]
        self.t_rank = self.g_rank[self.t_group]

        # first/last rank of each (key, value).
        by_kv = np.argsort(self.t_kv, kind="stable")
        starts = runs(self.t_kv[by_kv])
        self.f_kv = self.t_kv[by_kv][starts]
        self.f_first = (
            np.minimum.reduceat(self.t_rank[by_kv], starts) if len(starts) else np.zeros(0, int)
        )
        self.f_last = (
            np.maximum.reduceat(self.t_rank[by_kv], starts) if len(starts) else np.zeros(0, int)
        )
        self.f_places = np.diff(np.r_[starts, len(by_kv)])
        self.by_kv, self.f_starts = by_kv, starts

        # pos of every element: its offset's rank, else its value's first rank, else -1.
        rank = take(self.g_rank, IdIndex(self.g_ko, self.ko_space, no).find(self.ko))
        self.f_of = self.kv_index(self.f_kv).find(self.kv)  # each row's (key, value): f index
        first_rank = take(self.f_first, self.f_of)
        self.pos = np.where(rank >= 0, rank, first_rank)

    @cached_property
    def polls(self) -> np.ndarray:
        """Rows of polled values (read, edge and fencing rules all start from them)."""
        return np.flatnonzero(self.poll & self.a.has_val)

    @cached_property
    def poll_writer(self) -> np.ndarray:
        """The writer row of each of `polls`, -1 for a value nobody sent to the key."""
        return self.writer(self.kv[self.polls])

    def kv_index(self, kv: np.ndarray) -> IdIndex:
        return IdIndex(kv, self.kv_space, self.nv)

    def writer(self, kv: np.ndarray) -> np.ndarray:
        return take(self.w_row, self.w_index.find(kv))

    def group_values(self, g: int) -> list[int]:
        end = self.g_first_t[g + 1] if g + 1 < len(self.g_first_t) else len(self.t_kv)
        return [int(v) for v in self.a.value[self.shown[self.t_start[self.g_first_t[g] : end]]]]

    def first_row(self, t: int) -> int:
        """The first element row that showed triple t."""
        end = self.t_start[t + 1] if t + 1 < len(self.t_start) else len(self.shown)
        return int(self.shown[self.t_start[t] : end].min())

    def key_view(self, kid: int, rows: dict[int, int]) -> KeyView:
        """Key `kid` as order.LogView; `rows`: id(Elem) -> element row of the elements asked."""
        return KeyView(self, kid, rows)

    def shown_by(self, t: int) -> list[int]:
        """Ops that showed triple t, deduplicated, in op order."""
        end = self.t_start[t + 1] if t + 1 < len(self.t_start) else len(self.shown)
        ops = self.a.index[np.sort(self.shown[self.t_start[t] : end])]
        return list(dict.fromkeys(int(i) for i in ops))


class Skipped(Sequence[tuple[int, list[int]]]):
    """Records between two ranks of a key, built only as far as a finding quotes them."""

    def __init__(self, logs: Logs, g0: int, count: int) -> None:
        self.logs, self.g0, self.count = logs, g0, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.count))]
        g = self.g0 + i
        return (int(self.logs.g_off[g]), self.logs.group_values(g))


class KeyView:
    """order.LogView for one key, answered from the arrays."""

    def __init__(self, logs: Logs, kid: int, rows: dict[int, int]) -> None:
        self.logs, self.kid, self.key = logs, kid, int(logs.keys[kid])
        self.rows = rows  # id(Elem) -> element row

    def pos(self, e: Elem) -> int | None:
        p = int(self.logs.pos[self.rows[id(e)]])
        return None if p < 0 else p

    def between(self, r1: int, r2: int) -> Skipped:
        return Skipped(self.logs, int(self.logs.k_first_g[self.kid]) + r1 + 1, r2 - r1 - 1)
