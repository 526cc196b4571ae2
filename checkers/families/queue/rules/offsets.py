"""`inconsistent-offsets`: one offset of a key, several values. `duplicate`: one value of a key
at several offsets. Both from the key's version order: every [offset, value] a poll returned or
a send that certainly happened was acknowledged at."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from checkers.core.findings import Finding
from checkers.families.queue.context import QueueContext
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs

KINDS = ("inconsistent-offsets", "duplicate")


def inconsistent_offsets(k: int, o: int, vals: dict[int, list[int]]) -> Finding:
    """`vals`: value -> ops that showed it at offset `o`, in order of first appearance."""
    parts = "; ".join(f"value {v} (shown by op {', '.join(map(str, vals[v]))})" for v in vals)
    return Finding(
        "inconsistent-offsets",
        k,
        tuple(sorted({i for ops in vals.values() for i in ops})),
        f"offset {o} of key {k} holds {len(vals)} different values: {parts}; "
        "a partition offset names exactly one record",
        {"offset": o, "values": sorted(vals)},
    )


def duplicate(k: int, v: int, places: list[tuple[int, list[int]]]) -> Finding:
    """`places`: (offset, ops that showed `v` there), offsets ascending."""
    where = "; ".join(f"offset {o} (op {', '.join(map(str, ops))})" for o, ops in places)
    return Finding(
        "duplicate",
        k,
        tuple(sorted({i for _, ops in places for i in ops})),
        f"value {v} appears {len(places)} times in key {k}: {where}; "
        "it was sent once, so the partition holds a duplicate record",
        {"value": v, "offsets": [o for o, _ in places]},
    )


def reference(log: KeyLog, ctx: QueueContext) -> list[Finding]:
    k, out = log.key, []
    for o in log.offsets:
        vals = log.at[o]
        if len(vals) > 1:
            out.append(inconsistent_offsets(k, o, vals))
    places: dict[int, list[int]] = defaultdict(list)
    for o in log.offsets:
        for v in log.at[o]:
            places[v].append(o)
    for v, offs in places.items():
        if len(offs) > 1:
            out.append(duplicate(k, v, [(o, log.at[o][v]) for o in offs]))
    return out


def vectorised(logs: Logs, ctx: QueueContext) -> list[Finding]:
    out = []
    nvals = np.bincount(logs.t_group, minlength=len(logs.g_ko)) if len(logs.t_group) else []
    for g in np.flatnonzero(np.asarray(nvals) > 1):
        k = int(logs.keys[logs.g_kid[g]])
        ts = range(logs.g_first_t[g], logs.g_first_t[g] + int(nvals[g]))
        # Values in order of first appearance, as the reference's dict holds them.
        firsts = sorted(ts, key=logs.first_row)
        vals = {int(logs.a.value[logs.shown[logs.t_start[t]]]): logs.shown_by(t) for t in firsts}
        out.append(inconsistent_offsets(k, int(logs.g_off[g]), vals))
    for f in np.flatnonzero(logs.f_places > 1):
        ts = logs.by_kv[logs.f_starts[f] : logs.f_starts[f] + logs.f_places[f]]
        ts = sorted(ts, key=lambda t: logs.t_rank[t])
        t0 = ts[0]
        kid = int(logs.g_kid[logs.t_group[t0]])
        v = int(logs.a.value[logs.shown[logs.t_start[t0]]])
        places = [(int(logs.g_off[logs.t_group[t]]), logs.shown_by(t)) for t in ts]
        out.append(duplicate(int(logs.keys[kid]), v, places))
    return out
