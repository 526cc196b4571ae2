"""Writing decoded data partition logs in DumpLogSegments' exact shape, for hand-written cases."""

from __future__ import annotations

from dataclasses import dataclass

# The shape of a real kchaos-collected log (Kafka 3.9.2, `--deep-iteration --print-data-log`).
BATCH = (
    "baseOffset: {b} lastOffset: {l} count: {n} baseSequence: {s} lastSequence: {ls} "
    "producerId: {p} producerEpoch: {pe} partitionLeaderEpoch: {le} isTransactional: {t} "
    "isControl: {c} "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795326812806 size: 76 magic: 2 "
    "compresscodec: none crc: 1 isvalid: true"
)
DATA = (
    "| offset: {o} CreateTime: 1795326812806 keySize: 1 valueSize: 7 sequence: 0 headerKeys: [] "
    "key: {k} payload: {v}"
)
MARKER = (
    "| offset: {o} CreateTime: 1795326815169 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
    "endTxnMarker: {m} coordinatorEpoch: 0"
)


@dataclass(frozen=True)
class B:
    """One batch: `values` for data, `marker` (COMMIT / ABORT) for a control batch."""

    pid: int
    pepoch: int
    lepoch: int = 0
    values: tuple[int, ...] = ()
    marker: str | None = None
    seq: int = 0  # baseSequence
    txn: bool = True


def dump(partitions: dict[int, list[B]], topic: str = "t") -> str:
    """Batches of each partition at consecutive offsets from 0."""
    lines = []
    for p, batches in partitions.items():
        lines += [f"Dumping {topic}-{p}/00000000000000000000.log", "Log starting offset: 0"]
        o = 0
        for b in batches:
            n = 1 if b.marker else len(b.values)
            lines.append(
                BATCH.format(
                    b=o, l=o + n - 1, n=n, p=b.pid, pe=b.pepoch, le=b.lepoch,
                    c=str(b.marker is not None).lower(), s=b.seq, ls=b.seq + n - 1,
                    t=str(b.txn).lower(),
                )
            )  # fmt: skip
            if b.marker:
                lines.append(MARKER.format(o=o, m=b.marker))
            else:
                lines += [DATA.format(o=o + i, k=p, v=v) for i, v in enumerate(b.values)]
            o += n
    return "\n".join(lines) + "\n"


def segment_spec(
    partitions: dict[int, list[B]], topic: str = "t", compression: str = "none", under: str = ""
) -> str:
    """The same batches as `dump`, as spec lines for bench/java/KchaosSegmentWriter.java (real
    segment files, `under` a directory of the writer's root): one segment per partition,
    batches at consecutive offsets from 0."""
    lines = []
    for p, batches in partitions.items():
        lines.append(f"segment {under}{topic}-{p}/00000000000000000000.log")
        o = 0
        for b in batches:
            le = b.lepoch
            if b.marker:
                lines.append(f"marker {o} {b.pid} {b.pepoch} {le} {b.marker} 1795326812806")
                o += 1
                continue
            txn = int(b.txn)
            payloads = " ".join(str(v) for v in b.values)
            lines.append(
                f"data {o} {b.pid} {b.pepoch} {le} {txn} {b.seq} 1795326812806 {compression} "
                f"{payloads}"
            )
            o += len(b.values)
    return "\n".join(lines) + "\n"
