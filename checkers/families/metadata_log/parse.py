"""Reading `metadata/<node>.txt`: `kafka-dump-log --cluster-metadata-decoder` output.

The shape (Kafka 3.x and 4.x): a `Dumping <file>` line per segment, `Log starting offset: N`,
then per batch a `baseOffset: ... partitionLeaderEpoch: E ...` line followed by one
`| offset: O CreateTime: T ... payload: {json}` (or `controlType: ...`) line per record.
A file cut short (the dump or the copy was interrupted) loses only its last batch, with a note;
anything else that does not fit is one MetadataLogError naming the file and line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_BATCH = re.compile(
    r"^baseOffset: (-?\d+) lastOffset: (-?\d+) count: (\d+) .*?partitionLeaderEpoch: (-?\d+)"
)
_RECORD = re.compile(r"^\| offset: (-?\d+) CreateTime: (-?\d+) .*?(payload|controlType): (.*)$")
# KRaft's own control records, which DumpLogSegments names and prints as JSON: a dynamic
# quorum's kraft.version and voter set (KIP-853, 3.9+), a snapshot's header and footer, and from
# 4.1 on the leader change (earlier lines print it as `controlType: LEADER_CHANGE(2)`).
_KRAFT_CONTROL = re.compile(
    r"^\| offset: (-?\d+) CreateTime: (-?\d+) .*? "
    r"((?:KRaftVersion|KRaftVoters|SnapshotHeader|SnapshotFooter|LeaderChange:) \{.*)$"
)
# Lines the tool prints that carry nothing to check.
_IGNORED = ("Dumping ", "Starting offset:", "Snapshot end offset")
_SEGMENT = re.compile(r"^Log starting offset: (\d+)\s*$")


class MetadataLogError(Exception):
    """A decoded metadata log that cannot be read, with the place that shows why."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Record:
    node: str
    line: int  # 1-based line in the node's file, so a person can find it
    offset: int
    epoch: int  # the batch's partitionLeaderEpoch: the Raft epoch of the leader that wrote it
    create_ms: int  # the writing controller's wall clock
    text: str  # the payload JSON or the control type, as printed
    control: bool
    # The base offset of the batch it came in: a controller appends each operation's records as
    # one batch, so records of one batch were decided together (-1: not known).
    batch: int = -1

    @property
    def data(self) -> dict[str, Any]:
        """The record's `data` object ({} for control records)."""
        if self.control:
            return {}
        d = json.loads(self.text).get("data")
        return d if isinstance(d, dict) else {}

    @property
    def type(self) -> str:
        if self.control:
            return "CONTROL " + self.text
        return str(json.loads(self.text).get("type", "?"))

    def same_entry(self, other: Record) -> bool:
        """Replicated entries are byte copies: epoch, timestamp and content all agree."""
        return (self.epoch, self.create_ms, self.text) == (other.epoch, other.create_ms, other.text)

    def cite(self, path_prefix: str = "metadata/") -> str:
        where = f"{path_prefix}{self.node}.txt:{self.line}"
        return f"{where} offset {self.offset} epoch {self.epoch}: {self.text}"


@dataclass
class MetadataLog:
    node: str
    records: dict[int, Record] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    segment_base: int = 0  # base offset of the last segment (its file name)
    complete: bool = True  # False when the file was cut short: the log may hold more

    @property
    def last_offset(self) -> int:
        return max(self.records, default=-1)

    @property
    def end_offset(self) -> int:
        """The log end offset (exclusive), when `complete`: a segment left empty by snapshotting
        or truncation still says the log reached its base offset."""
        return max(self.last_offset + 1, self.segment_base)


def cut_line_note(name: str | Path) -> str:
    """The note for a file whose last line has no newline (that line is not evidence)."""
    return f"{name}: last line cut short (no newline), ignored"


def complete_lines(text: str, name: str | Path, notes: list[str]) -> list[str]:
    """The file's lines; one cut mid-line (no final newline) is not evidence and is dropped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        lines.pop()
        notes.append(cut_line_note(name))
    return lines


def parse_metadata_log(text: str, node: str, path: str | Path | None = None) -> MetadataLog:
    name = path or f"metadata/{node}.txt"
    log = MetadataLog(node)
    lines = complete_lines(text, name, log.notes)
    log.complete = not (text and not text.endswith("\n"))
    batch: tuple[int, int, int, int] | None = None  # base, last, epoch, first line
    seen_in_batch = 0
    segments = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith(_IGNORED):
            continue
        if m := _SEGMENT.match(line):
            log.segment_base = max(log.segment_base, int(m[1]))
            segments += 1
            continue
        if m := _BATCH.match(line):
            base, last, _count, epoch = (int(g) for g in m.groups())
            batch, seen_in_batch = (base, last, epoch, lineno), 0
            continue
        m = _RECORD.match(line)
        if m is not None:
            offset, create_ms, kind, body = int(m[1]), int(m[2]), m[3], m[4].strip()
        elif c := _KRAFT_CONTROL.match(line):
            offset, create_ms, kind, body = int(c[1]), int(c[2]), "controlType", c[3].strip()
        else:
            raise MetadataLogError(name, lineno, f"not a DumpLogSegments line: {line[:80]!r}")
        if batch is None:
            raise MetadataLogError(name, lineno, "record line before any batch header")
        if not batch[0] <= offset <= batch[1]:
            raise MetadataLogError(
                name, lineno, f"offset {offset} outside its batch {batch[0]}..{batch[1]}"
            )
        if kind == "payload":
            try:
                obj = json.loads(body)
            except json.JSONDecodeError as e:
                raise MetadataLogError(name, lineno, f"payload is not JSON ({e.msg})") from None
            if not isinstance(obj, dict) or "type" not in obj:
                raise MetadataLogError(name, lineno, "payload has no record type")
        prior = log.records.get(offset)
        if prior is not None:
            raise MetadataLogError(
                name, lineno, f"offset {offset} appears twice (first line {prior.line})"
            )
        log.records[offset] = Record(
            node, lineno, offset, batch[2], create_ms, body, kind != "payload", batch[0]
        )
        seen_in_batch += 1
    if batch is not None and seen_in_batch < batch[1] - batch[0] + 1 and log.last_offset < batch[1]:
        # The final batch lost records: the file was truncated. Keep what is complete.
        log.complete = False
        log.notes.append(
            f"{name}: last batch (line {batch[3]}) ends at offset {log.last_offset}, "
            f"header says {batch[1]}: file truncated, the rest is not checked"
        )
    if not segments:
        # No segment was dumped (an empty file): where this log ends is unknown.
        log.complete = False
    return log


def read_metadata_logs(directory: str | Path) -> dict[str, MetadataLog]:
    """Every `<node>.txt` of a run's `metadata/` directory, by node name."""
    d = Path(directory)
    out = {}
    for p in sorted(d.glob("*.txt")):
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise MetadataLogError(p, None, f"cannot read: {e}") from None
        out[p.stem] = parse_metadata_log(text, p.stem, p)
    return out
