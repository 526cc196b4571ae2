"""Writing decoded metadata logs in DumpLogSegments' exact shape, for hand-written cases."""

from __future__ import annotations

import json
from typing import Any

BASE_MS = 1795312546104
# Copied from a real kchaos-collected run (Kafka 3.9.2, kraft-combined, controller n1).
BATCH = (
    "baseOffset: {o} lastOffset: {o} count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: {e} isTransactional: false isControl: {c} "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {t} size: 72 magic: 2 "
    "compresscodec: none crc: 1 isvalid: true"
)
RECORD = "| offset: {o} CreateTime: {t} keySize: -1 valueSize: 4 sequence: -1 headerKeys: [] {body}"


def rec(type_: str, **data: Any) -> dict[str, Any]:
    return {"type": type_, "version": 0, "data": data}


def dump(entries: list[tuple[int, dict[str, Any] | str]], start_ms: int = BASE_MS) -> str:
    """entries: (leader epoch, payload or a control type) at offsets 0, 1, ...; 100 ms apart."""
    lines = [
        "Dumping /tmp/x/__cluster_metadata-0/00000000000000000000.log",
        "Log starting offset: 0",
    ]
    for o, (epoch, body) in enumerate(entries):
        t = start_ms + 100 * o
        control = isinstance(body, str)
        text = (
            f"controlType: {body}"
            if control
            else "payload: " + json.dumps(body, separators=(",", ":"))
        )
        lines.append(BATCH.format(o=o, e=epoch, c=str(control).lower(), t=t))
        lines.append(RECORD.format(o=o, t=t, body=text))
    return "\n".join(lines) + "\n"


def healthy(epoch: int = 2) -> list[tuple[int, dict[str, Any] | str]]:
    """The start of a real log: leader change, bootstrap, three registrations, a topic."""
    t = "cLeQx89bSOu6lgtiqv6AmA"
    return [
        (epoch, "LEADER_CHANGE(2)"),
        (epoch, rec("FEATURE_LEVEL_RECORD", name="metadata.version", featureLevel=21)),
        (epoch, rec("REGISTER_BROKER_RECORD", brokerId=1, brokerEpoch=2, fenced=True)),
        (epoch, rec("REGISTER_BROKER_RECORD", brokerId=2, brokerEpoch=3, fenced=True)),
        (epoch, rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=1, brokerEpoch=2, fenced=-1)),
        (epoch, rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=2, brokerEpoch=3, fenced=-1)),
        (epoch, rec("TOPIC_RECORD", name="t", topicId=t)),
        (epoch, rec("PARTITION_RECORD", partitionId=0, topicId=t, replicas=[1, 2], isr=[1, 2],
                    leader=1, leaderEpoch=0, partitionEpoch=0)),
        (epoch, rec("NO_OP_RECORD")),
    ]  # fmt: skip


CLUSTER = {
    "timing": "fast",
    "nodes": [
        {"name": f"n{i}", "roles": ["broker", "controller"], "node_id": i} for i in (1, 2, 3)
    ],
}


def dump_batches(
    batches: list[tuple[int, list[dict[str, Any] | str]]],
    start_ms: int = BASE_MS,
    times: list[int] | None = None,
) -> str:
    """A log whose batches hold several records each, as a controller appends an operation's
    records (a fence's partition changes and its fence record, say): batches[i] = (leader epoch,
    its payloads or control types), 100 ms apart unless `times` (ms, one per batch) says."""
    lines = [
        "Dumping /tmp/x/__cluster_metadata-0/00000000000000000000.log",
        "Log starting offset: 0",
    ]
    o = 0
    for i, (epoch, bodies) in enumerate(batches):
        t = times[i] if times is not None else start_ms + 100 * i
        control = all(isinstance(b, str) for b in bodies)
        last = o + len(bodies) - 1
        header = BATCH.format(o=o, e=epoch, c=str(control).lower(), t=t)
        lines.append(header.replace(f"lastOffset: {o} count: 1", f"lastOffset: {last} count: "
                                    f"{len(bodies)}"))  # fmt: skip
        for body in bodies:
            text = (
                f"controlType: {body}"
                if isinstance(body, str)
                else "payload: " + json.dumps(body, separators=(",", ":"))
            )
            lines.append(RECORD.format(o=o, t=t, body=text))
            o += 1
    return "\n".join(lines) + "\n"
