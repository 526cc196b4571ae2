"""Fenced brokers that still append acknowledged sends (KIP-631 broker ID leases).

The controller fences a broker in a committed record once its lease has run out; from then on
"it cannot process any client requests". A send acknowledged ok whose write the broker appended
as leader, invoked more than the session timeout plus a tolerance after that record (and
completed before any record anywhere unfences or re-registers the broker), breaks this.

Attribution is exact when the run collected data logs (checkers/families/data_log/attribution.py):
the batch holding the send's write names the leader epoch that appended it, and the committed
metadata log names that epoch's leader. Such a send's write survived (it is in a final log), so
alone it is reported as tolerated (`TOLERATED` says why: Kafka brokers do not expire their own
lease); a failing data finding that cites the op makes it a failure. A send found in no final log
falls back to the history:
its `node` is the leader the client's leader map named (workloads/queue.py LeaderMap, refreshed
every second), not the broker that appended it. Such a send alone proves nothing (a stale leader
map is routine after a kill), so it is only counted in a note, and a failure only when a failing
queue finding also cites the op (its write was then lost, duplicated or reordered: the
consequence a fenced leader's acknowledgement would have).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkers.core.findings import Finding
from checkers.families.data_log.attribution import Attribution, Attributions
from checkers.families.metadata_log.parse import MetadataLog, Record

RULE = (
    'KIP-631: "Brokers that don\'t have a broker ID lease are said to be "fenced." When a broker '
    'is fenced, it cannot process any client requests"; "A broker cannot continue using a lease '
    'indefinitely after sending a single heartbeat"'
)
# Why an exactly attributed violation alone does not make a run invalid (Jepsen's "tolerated").
TOLERATED = (
    "Kafka brokers do not expire their own lease: a fenced leader goes on serving until it hears "
    "of its fencing, and followers still fetching from it keep its acks=all writes replicated. "
    "The write survives in the final logs and no failing data finding cites the op, so this is "
    "reported without failing the run; it fails when a lost, duplicate or reordered write "
    "corroborates it"
)
# broker.session.timeout.ms: Kafka's default, and kchaos's "fast" timing (clusters/config.py).
SESSION_TIMEOUT_MS = {"default": 9000, "fast": 3000}
# Controllers and the harness read the clock of one Docker host; this covers scheduling delay
# and the client's own delivery-report latency.
DEFAULT_TOLERANCE_MS = 2000


@dataclass(frozen=True)
class Fencing:
    broker: int
    record: Record  # committed: the fence
    until: Record | None  # the earliest record in any log that unfences or re-registers


def _is_fence(r: Record) -> int | None:
    d = r.data
    if r.type == "FENCE_BROKER_RECORD" and isinstance(d.get("id"), int):
        return d["id"]
    if r.type == "BROKER_REGISTRATION_CHANGE_RECORD" and d.get("fenced") == 1:
        return d.get("brokerId")
    return None


def _is_unfence(r: Record) -> int | None:
    d = r.data
    if r.type == "UNFENCE_BROKER_RECORD":
        return d.get("id")
    if r.type == "REGISTER_BROKER_RECORD":
        return d.get("brokerId")
    if r.type == "BROKER_REGISTRATION_CHANGE_RECORD" and d.get("fenced") == -1:
        return d.get("brokerId")
    return None


def fencings(committed: list[Record], logs: dict[str, MetadataLog]) -> list[Fencing]:
    """Committed fences, each ended by the first unfence seen anywhere after it (uncommitted
    ones too: the broker may have served again as soon as any controller said so)."""
    unfences = sorted(
        (
            r
            for log in logs.values()
            for r in log.records.values()
            if not r.control and _is_unfence(r) is not None
        ),
        key=lambda r: r.create_ms,
    )
    out = []
    for r in committed:
        if r.control or (broker := _is_fence(r)) is None:
            continue
        after = [u for u in unfences if _is_unfence(u) == broker and u.create_ms >= r.create_ms]
        out.append(Fencing(broker, r, after[0] if after else None))
    return out


def _finding(
    fence: Fencing,
    op: dict[str, Any],
    late: float,
    session_timeout_ms: int,
    tolerance_ms: int,
    how: str,
    cites: list[str],
    tolerated: str | None = None,
) -> Finding:
    cites = [fence.record.cite()] + ([fence.until.cite()] if fence.until else []) + cites
    return Finding(
        "lease-violation",
        None,
        (op["index"],),
        f"broker {fence.broker} was fenced by a committed record ({fence.record.cite()}), yet "
        f"op {op['index']}, invoked {late:.3f} s later (more than the "
        f"{session_timeout_ms / 1000:g} s session timeout + {tolerance_ms / 1000:g} s), was "
        f"acknowledged ok and {how}. Rule: {RULE}",
        {"rule": RULE, "records": cites, "broker": fence.broker, "late_s": late},
        tolerated=tolerated,
    )


def _appended(a: Attribution) -> str:
    return (
        f"its write (key {a.key} offset {a.offset}) is in a batch broker {a.leader.broker} "
        f"appended as leader in epoch {a.leader.epoch} ({a.batch.cite()}; epoch started by "
        f"{a.leader.record.cite()})"
    )


def lease_windows(
    committed: list[Record],
    logs: dict[str, MetadataLog],
    session_timeout_ms: int,
    tolerance_ms: int = DEFAULT_TOLERANCE_MS,
) -> list[tuple[float, float]]:
    """Each fence's window (wall seconds): a send invoked after its start and completed before
    its end is one `lease_violations` judges."""
    return [_window(f, session_timeout_ms, tolerance_ms) for f in fencings(committed, logs)]


def sends_within(
    sends: Iterable[dict[str, Any]], windows: list[tuple[float, float]]
) -> list[dict[str, Any]]:
    """The sends inside some window: the only ones `lease_violations` reads, and the only ones
    whose data-log attribution it needs. `sends` as OpRows (an Arrow table with
    `invoke_wall` and `wall`) are picked by column, without a dict per send."""
    if not windows:
        return []
    within = getattr(sends, "within", None)
    if callable(within):  # read only now, and only what falls inside (check.SendRows)
        return list(within(windows))
    table = getattr(sends, "table", None)
    if isinstance(table, pa.Table) and {"invoke_wall", "wall"} <= set(table.column_names):
        inv, done = (_walls(table.column(c)) for c in ("invoke_wall", "wall"))
        inside = np.zeros(len(inv), dtype=bool)
        for start, end in windows:  # a null wall is NaN: outside every window
            inside |= (start < inv) & (done < end)
        return table.filter(pa.array(inside)).to_pylist()
    return [op for op in sends if any(_within(w, op) for w in windows)]


def _walls(col: pa.ChunkedArray) -> np.ndarray:
    """A wall-clock column as floats, null as NaN (outside every window)."""
    filled = pc.fill_null(col.cast(pa.float64()), float("nan"))
    return np.asarray(filled.to_numpy(), dtype=np.float64)


def _window(fence: Fencing, session_timeout_ms: int, tolerance_ms: int) -> tuple[float, float]:
    start_s = (fence.record.create_ms + session_timeout_ms + tolerance_ms) / 1000
    end_s = fence.until.create_ms / 1000 if fence.until else float("inf")
    return start_s, end_s


def _within(window: tuple[float, float], op: dict[str, Any]) -> bool:
    inv, done = op.get("invoke_wall"), op.get("wall")
    return inv is not None and done is not None and window[0] < inv and done < window[1]


def lease_violations(
    committed: list[Record],
    logs: dict[str, MetadataLog],
    sends: Iterable[dict[str, Any]],
    node_ids: dict[str, int],
    session_timeout_ms: int,
    corroborated_ops: set[int],
    tolerance_ms: int = DEFAULT_TOLERANCE_MS,
    attributed: Attributions | None = None,
) -> tuple[list[Finding], list[int]]:
    """Findings, and the ops that only the leader map attributes (uncorroborated suspects).

    `sends`: ok send/txn completions with `index`, `node`, `wall` and `invoke_wall`.
    `attributed`: the data logs' attribution of sends to appending leaders, when collected.
    """
    out = []
    suspects: list[int] = []
    placed = attributed.placed if attributed else {}
    for fence in fencings(committed, logs):
        window = _window(fence, session_timeout_ms, tolerance_ms)
        for op in sends:
            if not _within(window, op):
                continue
            inv = op["invoke_wall"]
            late = inv - fence.record.create_ms / 1000
            exact = placed.get(op["index"])
            if exact:
                for a in exact:
                    if a.leader.broker == fence.broker:
                        cites = [a.batch.cite(), a.leader.record.cite()]
                        ok = op["index"] not in corroborated_ops
                        how = _appended(a)
                        f = _finding(
                            fence,
                            op,
                            late,
                            session_timeout_ms,
                            tolerance_ms,
                            how,
                            cites,
                            TOLERATED if ok else None,
                        )
                        out.append(f)
                        break
                continue
            if node_ids.get(op.get("node") or "") != fence.broker:
                continue
            if op["index"] not in corroborated_ops:
                suspects.append(op["index"])
                continue
            how = f"named {op['node']} as leader; a failing queue finding cites the same op"
            out.append(_finding(fence, op, late, session_timeout_ms, tolerance_ms, how, []))
    return out, suspects
