"""The data-log rules as plain loops over batches and op rows: the yardstick the vectorised rules
(checkers/families/data_log/) are held to. Each is the rule as it was written before the rules
ran over arrays (one batch, one op at a time), reading the same Batch objects; the findings are
worded by the same functions."""

from __future__ import annotations

from typing import Any

from checkers.families.data_log.acks import AckedScan, Suspect
from checkers.families.data_log.attribution import Attribution, Attributions, Leadership
from checkers.families.data_log.fencing import Stale
from checkers.families.data_log.log import Batch, DataLog, is_value_text
from checkers.families.data_log.resent import Copy
from checkers.families.data_log.sends import OpRef, send_mops


def acked_writes(op: dict[str, Any]) -> list[tuple[int, int, int]]:
    out = []
    for _, key, ov in send_mops(op):
        if isinstance(ov, list) and len(ov) == 2 and all(isinstance(x, int) for x in ov):
            out.append((key, ov[0], ov[1]))
    return out


def stale_batches(logs: dict[str, DataLog]) -> list[Stale]:
    found: dict[tuple[str, int, int], Stale] = {}
    for log in logs.values():
        for batches in log.partitions.values():
            newest: dict[int, Batch] = {}
            for b in batches:
                if b.producer_id < 0:
                    continue
                prior = newest.get(b.producer_id)
                stale = prior is not None and b.producer_epoch < prior.producer_epoch
                if stale and (not b.control or b.marker == "COMMIT"):
                    assert prior is not None
                    key = (b.topic, b.partition, b.base)
                    found.setdefault(key, (b, prior, []))[2].append(b)
                if prior is None or b.producer_epoch > prior.producer_epoch:
                    newest[b.producer_id] = b
    return list(found.values())


def appended_twice(logs: dict[str, DataLog]) -> list[tuple[int, int, list[Copy]]]:
    found: dict[tuple[int, int], list[Copy]] = {}
    for node in sorted(logs):
        for key, batches in logs[node].partitions.items():
            first: dict[str, Copy] = {}
            repeats: dict[str, list[Copy]] = {}
            aborted = _aborted(batches)
            for i, b in enumerate(batches):
                if b.control or not b.payloads or i in aborted:
                    continue
                for offset, payload in b.payloads.items():
                    seen = first.get(payload)
                    if seen is None:
                        first[payload] = Copy(offset, b)
                    else:
                        repeats.setdefault(payload, [seen]).append(Copy(offset, b))
            for payload, copies in repeats.items():
                if is_value_text(payload):
                    found.setdefault((key, int(payload)), copies)
    return [(key, value, copies) for (key, value), copies in sorted(found.items())]


def _aborted(batches: list[Batch]) -> set[int]:
    out: set[int] = set()
    next_marker: dict[int, str | None] = {}
    for i in range(len(batches) - 1, -1, -1):
        b = batches[i]
        if b.control:
            next_marker[b.producer_id] = b.marker
        elif b.transactional and next_marker.get(b.producer_id) == "ABORT":
            out.add(i)
    return out


def marker_epochs(logs: dict[str, DataLog]) -> tuple[int, int]:
    same = bumped = 0
    for log in logs.values():
        for batches in log.partitions.values():
            last_write: dict[int, int] = {}
            for b in batches:
                if b.producer_id < 0 or not b.transactional:
                    continue
                if not b.control:
                    last_write[b.producer_id] = b.producer_epoch
                    continue
                wrote = last_write.pop(b.producer_id, None)
                if wrote is None:
                    continue
                if b.producer_epoch == wrote:
                    same += 1
                elif b.producer_epoch == wrote + 1:
                    bumped += 1
    return same, bumped


def scan_acked(logs: dict[str, DataLog], op_rows: list[dict[str, Any]]) -> AckedScan:
    scan = AckedScan()
    for op in op_rows:
        if op.get("type") != "ok" or op.get("f") not in ("send", "txn"):
            continue
        for key, offset, value in acked_writes(op):
            held = [b for log in logs.values() if (b := log.batch_at(key, offset)) is not None]
            there = {b.payloads.get(offset) for b in held}
            if not held or str(value) in there or None in there:
                continue
            found_at = {
                o
                for log in logs.values()
                for b in log.partitions.get(key, ())
                for o, p in b.payloads.items()
                if p == str(value)
            }
            if found_at:
                scan.moved.append(
                    f"op {op['index']} value {value}: acknowledged at key {key} offset "
                    f"{offset}, held at offset(s) {sorted(found_at)}"
                )
                continue
            ref = OpRef(
                op["index"], "ok", None if op.get("process") is None else str(op["process"])
            )
            scan.suspects.append(Suspect(ref, key, offset, value, held))
    return scan


def attribute(
    sends: list[dict[str, Any]],
    logs: dict[str, DataLog],
    leaders: dict[int, dict[int, Leadership]],
    keep: set[int] | None = None,
) -> Attributions:
    result = Attributions({}, [], [])
    ambiguous: list[str] = []
    for op in sends:
        if op.get("type") != "ok" or op.get("f", "send") not in ("send", "txn"):
            continue
        placed = False
        kept = keep is None or op["index"] in keep
        for key, offset, value in acked_writes(op):
            held = [
                b
                for log in logs.values()
                if (b := log.batch_at(key, offset)) is not None
                and b.payloads.get(offset) == str(value)
            ]
            epochs = {b.leader_epoch for b in held}
            if not held:
                result.unplaced.append(op["index"])
                continue
            lead = leaders.get(key, {}).get(epochs.pop()) if len(epochs) == 1 else None
            if lead is None:
                shown = ", ".join(sorted(b.cite() for b in held))
                ambiguous.append(f"op {op['index']} (key {key} offset {offset}): {shown}")
                continue
            placed = True
            if kept:
                result.placed.setdefault(op["index"], []).append(
                    Attribution(op["index"], key, offset, value, held[0], lead)
                )
        result.n_placed += placed
    if ambiguous:
        result.notes.append(
            f"data logs: {len(ambiguous)} acknowledged writes not attributed to a leader "
            "(copies in different leader epochs, or an epoch the committed metadata log does "
            "not name): " + "; ".join(ambiguous[:5]) + (" …" if len(ambiguous) > 5 else "")
        )
    result.unplaced = sorted(set(result.unplaced))
    return result
