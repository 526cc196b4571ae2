"""Fenced brokers that still acknowledge sends (KIP-631 broker ID leases).

The controller fences a broker in a committed record once its lease has run out; from then on
"it cannot process any client requests". A send acknowledged with the broker named as the
partition leader, invoked more than the session timeout plus a tolerance after that record
(and completed before any record anywhere unfences or re-registers the broker), breaks this.

Attribution: kchaos records in a send's `node` the leader the client's leader map named
(workloads/queue.py LeaderMap, refreshed every second, kept when a refresh fails), not the
broker whose acknowledgement the client received. Such a send alone proves nothing (a stale
leader map is routine after a kill), so it is only counted in a note: reporting it as an
unknown finding would turn nearly every run with faults "unknown". It is a failure when a
failing queue finding also cites the op (its write was then lost, duplicated or reordered: the
consequence a fenced leader's acknowledgement would have).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers.findings import Finding
from checkers.metadata_log.parse import MetadataLog, Record

RULE = (
    'KIP-631: "Brokers that don\'t have a broker ID lease are said to be "fenced." When a broker '
    'is fenced, it cannot process any client requests"; "A broker cannot continue using a lease '
    'indefinitely after sending a single heartbeat"'
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


def lease_violations(
    committed: list[Record],
    logs: dict[str, MetadataLog],
    sends: list[dict[str, Any]],
    node_ids: dict[str, int],
    session_timeout_ms: int,
    corroborated_ops: set[int],
    tolerance_ms: int = DEFAULT_TOLERANCE_MS,
) -> tuple[list[Finding], list[int]]:
    """Findings for corroborated sends, and the ops that only the leader map attributes.

    `sends`: ok send/txn completions with `index`, `node`, `wall` and `invoke_wall`.
    """
    out = []
    suspects: list[int] = []
    for fence in fencings(committed, logs):
        start_s = (fence.record.create_ms + session_timeout_ms + tolerance_ms) / 1000
        end_s = fence.until.create_ms / 1000 if fence.until else float("inf")
        for op in sends:
            if node_ids.get(op.get("node") or "") != fence.broker:
                continue
            inv, done = op.get("invoke_wall"), op.get("wall")
            if inv is None or done is None or not (start_s < inv and done < end_s):
                continue
            if op["index"] not in corroborated_ops:
                suspects.append(op["index"])
                continue
            late = inv - fence.record.create_ms / 1000
            cites = [fence.record.cite()] + ([fence.until.cite()] if fence.until else [])
            out.append(
                Finding(
                    "lease-violation",
                    None,
                    (op["index"],),
                    f"broker {fence.broker} ({op['node']}) was fenced by a committed record "
                    f"({fence.record.cite()}), yet op {op['index']}, invoked {late:.3f} s later "
                    f"(more than the {session_timeout_ms / 1000:g} s session timeout + "
                    f"{tolerance_ms / 1000:g} s), was acknowledged with {op['node']} named as "
                    "leader" + "; a failing queue finding cites the same op" + f". Rule: {RULE}",
                    {"rule": RULE, "records": cites, "broker": fence.broker, "late_s": late},
                )
            )
    return out, suspects
