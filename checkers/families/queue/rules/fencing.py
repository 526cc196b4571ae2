"""`fenced-producer-read`: a fenced transactional producer's write seen by clients, from the
history alone (the data logs' `fenced-producer-write`/`-commit` see it in the brokers' logs).

With transactions on, the queue workload gives each worker slot one transactional.id
(`generator.transactional_id`, history/format.TXN_ID_PER_SLOT): process p runs on slot
p mod `generator.concurrency`, and the process replacing a retired one is p + concurrency
(harness ProcessIds), so on one slot a higher process id started later. Before its first
transactional write a process calls InitProducerId, which bumps the slot's producer epoch and
fences every earlier process of the slot (KIP-98); every write of an earlier process was
produced under an epoch it was given before it retired, so an older one.

So if process p' of p's slot, p' > p, wrote record R' to a partition, acknowledged at offset o'
(an ok send), then any record of p at a higher offset o of that partition was appended after R'
(offsets order one log's appends; a committed record is in every later leader's log), so after
the fence. A read_committed consumer returning it means its transaction committed: the zombie
KIP-98 fences off moved forward. Every consumer of a transactional run reads read_committed.

Only unambiguous offsets count: o' must hold only the value of R' (and that value no other
offset), and o only the value read; an offset holding two values is an `inconsistent-offsets`
finding already, and an ack the polls contradict is no proof of where R' is. Not judged: runs
without transactions (no fencing), plans that do not say ids are per slot (runs before that
scheme named one id per process, which fences nobody), histories without a plan (Jepsen's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from checkers.core.findings import Finding, secs
from checkers.core.run_files import read_generator
from checkers.families.data_log.fencing import RULE
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import OK, Elem
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs
from checkers.scan.npsets import dense_ids, sort_rows
from history.format import ASYNC_SEND_MODE, TXN_ID_PER_SLOT

KINDS = ("fenced-producer-read",)
_NOT_JUDGED = "fenced-producer-read not judged: "


def run_slots(run_dir: Path) -> tuple[int | None, str | None]:
    """(worker slots sharing transactional ids, or None; why not judged, if it should be said).
    A run without transactions is simply outside the rule: no note."""
    return generator_slots(read_generator(run_dir))


def generator_slots(gen: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """run_slots of a plan's generator already read (None: the run has no plan.json)."""
    if gen is None:
        return None, (
            _NOT_JUDGED + "no plan.json beside the history says whether producers were "
            "transactional and which processes shared a transactional.id"
        )
    if gen.get("workload", "queue") != "queue" or gen.get("txn") is not True:
        return None, None
    if gen.get("send_mode") == ASYNC_SEND_MODE and not gen.get("txn_sends"):
        # Pipelined transactions run one process per worker slot, as sync ones; a plan that
        # pairs async sends and transactions without `txn_sends` would have lanes (slot s owns
        # s*in_flight ...), where `process mod concurrency` is no slot.
        return None, (
            _NOT_JUDGED + "pipelined sends: process ids are a producer's lanes, not worker slots"
        )
    if gen.get("transactional_id") != TXN_ID_PER_SLOT:
        return None, (
            _NOT_JUDGED + "the plan does not say transactional ids are per worker slot "
            "(runs before that scheme had one id per process, which fences nobody)"
        )
    slots = gen.get("concurrency")
    if not isinstance(slots, int) or isinstance(slots, bool) or slots <= 0:
        return None, (
            _NOT_JUDGED + f"the plan's concurrency ({slots!r}) does not give each process "
            "its worker slot"
        )
    return slots, None


def _number(process: str | None) -> int:
    """A client process's id, -1 for anything else (nemesis, observer, odd names)."""
    p = str(process)
    return int(p) if p.isascii() and p.isdigit() else -1


def _sent(w: Elem) -> str:
    outcome = {"ok": "acknowledged", "info": "timed out (info)", "fail": "failed"}
    return f"op {w.index}, {outcome.get(w.type, 'never completed')}"


def fenced_producer_read(
    k: int, v: int, w: Elem, fence: Elem, reads: list[Elem], slots: int, rule: str
) -> Finding:
    """`w`: the send of `v` by the fenced process; `fence`: the lowest-offset committed send to
    key k of a later process of the same slot; `reads`: the polls that returned `v` above it."""
    offsets = sorted({e.offset for e in reads if e.offset is not None})
    polls = sorted({e.index for e in reads})
    slot = int(w.process) % slots
    return Finding(
        "fenced-producer-read",
        k,
        tuple(sorted({w.index, fence.index, *polls})),
        f"value {v} of key {k}, sent by process {w.process} ({_sent(w)}), was returned to a "
        f"read_committed consumer at offset {', '.join(map(str, offsets))} (op "
        f"{', '.join(map(str, polls))}), above offset {fence.offset}, where process "
        f"{fence.process} wrote value {fence.value} in a committed transaction (op "
        f"{fence.index}, ok at {secs(fence.time)}). Processes {w.process} and {fence.process} "
        f"ran on worker slot {slot} (process mod {slots}) and so used one transactional.id; "
        f"process {fence.process} took the slot after process {w.process} retired, and its "
        f"InitProducerId, done before that write, fenced process {w.process}'s producer epoch. "
        f"Process {w.process}'s record sits above that write in the partition, so it was "
        "appended after the fence, and a read_committed consumer returned it, so its "
        f"transaction committed: a fenced producer's write became visible. Rule: {rule}",
        {
            "value": v,
            "offsets": offsets,
            "writer": w.index,
            "fence": fence.index,
            "fence_offset": fence.offset,
            "slot": slot,
            "rule": rule,
        },
    )


# -- the reference, one key ------------------------------------------------------------------


def reference(log: KeyLog, ctx: QueueContext) -> list[Finding]:
    """`ctx.slots`: worker slots sharing transactional ids (run_slots), None: not judged."""
    slots, elems = ctx.slots, log.elems
    if slots is None:
        return []

    def single(offset: int) -> bool:
        return len(log.at[offset]) == 1

    # slot -> (generation on the slot, offset, op index, send) of committed sends.
    fences: dict[int, list[tuple[int, int, int, Elem]]] = {}
    for e in elems:
        n = _number(e.process)
        if e.kind != "send" or e.type != OK or e.offset is None or e.value is None or n < 0:
            continue
        if single(e.offset) and log.first[e.value] == log.last[e.value]:
            fences.setdefault(n % slots, []).append((n // slots, e.offset, e.index, e))
    found: dict[int, tuple[Elem, Elem, list[Elem]]] = {}
    for e in elems:
        if e.kind != "poll" or e.offset is None or e.value is None or not single(e.offset):
            continue
        w = log.writer.get(e.value)
        n = _number(w.process) if w is not None else -1
        later = [f for f in fences.get(n % slots, ()) if f[0] > n // slots] if n >= 0 else []
        if not later or w is None:
            continue
        fence = min(later, key=lambda f: (f[1], f[2]))
        if e.offset > fence[1]:
            found.setdefault(e.value, (w, fence[3], []))[2].append(e)
    return [
        fenced_producer_read(log.key, v, w, f, reads, slots, RULE)
        for v, (w, f, reads) in found.items()
    ]


# -- the same over the arrays of many keys -------------------------------------------------


def vectorised(logs: Logs, ctx: QueueContext) -> list[Finding]:
    slots = ctx.slots
    if slots is None or len(logs.g_ko) == 0:
        return []
    a = logs.a
    numbers = np.array([_number(n) for n in a.proc_names] + [-1], dtype=np.int64)
    nvals = np.bincount(logs.t_group, minlength=len(logs.g_ko))

    def single(rows: np.ndarray) -> np.ndarray:
        """Rows (polls, committed sends: placed by their own offset) whose offset holds one
        value."""
        return nvals[logs.k_first_g[logs.kid[rows]] + logs.pos[rows]] == 1

    f = np.flatnonzero(logs.send & logs.is_ok & a.has_off)
    f = f[a.has_val[f] & (numbers[a.proc[f]] >= 0)]
    f = f[single(f) & (logs.f_places[logs.f_of[f]] == 1)]
    if len(f) == 0:
        return []
    # Committed sends sorted by (key, slot, generation on the slot); the lowest offset at or
    # after each position within its (key, slot), so that a lookup just past the writer's
    # generation gives the lowest offset any later process of its slot wrote at.
    proc = numbers[a.proc[f]]
    f_grp, f_gen = logs.kid[f] * slots + proc % slots, proc // slots
    order = sort_rows(f_grp, f_gen)
    f, f_grp, f_gen = f[order], f_grp[order], f_gen[order]
    lowest = _suffix_min(f_grp, a.offset[f])
    last = np.flatnonzero(np.r_[f_grp[1:] != f_grp[:-1], True])
    newest = np.full(len(logs.keys) * slots, -1, dtype=np.int64)
    newest[f_grp[last]] = f_gen[last]

    # Reads of a value whose writer is older than the newest writer of its slot to the key.
    r, w = logs.polls, logs.poll_writer
    keep = np.flatnonzero(w >= 0)
    r, w = r[keep], w[keep]
    wproc = numbers[a.proc[w]]
    r_grp = logs.kid[r] * slots + wproc % slots
    keep = np.flatnonzero((wproc >= 0) & (wproc // slots < newest[r_grp]))
    r, w, wproc, r_grp = r[keep], w[keep], wproc[keep], r_grp[keep]
    keep = np.flatnonzero(a.has_off[r])
    keep = keep[single(r[keep])]
    r, w, wproc, r_grp = r[keep], w[keep], wproc[keep], r_grp[keep]

    span = int(max(f_gen.max(), (wproc // slots).max(initial=0))) + 2
    j = np.searchsorted(f_grp * span + f_gen, r_grp * span + wproc // slots, side="right")
    jc = np.minimum(j, len(f) - 1)
    hit = (j < len(f)) & (f_grp[jc] == r_grp) & (a.offset[r] > lowest[jc])
    if not hit.any():
        return []

    found: dict[tuple[int, int], tuple[Elem, Elem, list[Elem]]] = {}
    for i, wi, jj in zip(r[hit].tolist(), w[hit].tolist(), jc[hit].tolist(), strict=True):
        key = (int(logs.kid[i]), int(a.value[i]))
        if key not in found:
            later = np.arange(jj, np.searchsorted(f_grp, f_grp[jj], side="right"))
            best = later[sort_rows(a.offset[f[later]], a.index[f[later]])[0]]
            found[key] = (a.elem(wi), a.elem(int(f[best])), [])
        found[key][2].append(a.elem(i))
    return [
        fenced_producer_read(int(logs.keys[kid]), v, we, fe, reads, slots, RULE)
        for (kid, v), (we, fe, reads) in found.items()
    ]


def _suffix_min(group: np.ndarray, x: np.ndarray) -> np.ndarray:
    """out[i] = min(x[j] for j >= i in i's run of equal `group`); `group` sorted ascending.
    One running minimum over the reversed rows, each later run shifted below every earlier
    one (by ranks, so the shift stays small) so that the minimum restarts at each run."""
    ranks, rank = dense_ids(x, np.ones(len(x), dtype=bool))
    rev_rank, rev_group = rank[::-1], group[::-1]
    run = np.cumsum(np.r_[False, rev_group[1:] != rev_group[:-1]])
    shift = len(ranks)
    low = np.minimum.accumulate(rev_rank - run * shift) + run * shift
    return ranks[low[::-1]]
