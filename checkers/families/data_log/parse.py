"""Reading a run's `data/`: every broker's final logs of the queue topic, as DataLog arrays.

Two forms, one result (log.py): the decoder's binary rows (`<broker>.decoded.json` with its
`.batches.bin` and `.records.bin`, segments.py), and DumpLogSegments text (`<broker>.txt`: runs
from before the decoder, and hand-written cases), parsed here a line at a time.

The text's shape (Kafka 3.x and 4.x alike, `--deep-iteration --print-data-log`): a
`Dumping <topic>-<p>/<segment>.log` line per segment, `Log starting offset: N`, then per batch a
header line

    baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1000
    producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false ...
    position: 0 CreateTime: 1795326812806 size: 76 ...

(one line) followed by one line per record: `| offset: O CreateTime: T ... payload: V` for data,
`| offset: O ... endTxnMarker: COMMIT coordinatorEpoch: C` for a transaction marker.
A file cut short loses only its last batch, with a note; anything else that does not fit is one
DataLogError naming the file and line.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path

import numpy as np

from checkers.families.data_log.log import (
    BATCH_DTYPE,
    CONTROL,
    MARKER_CODES,
    OTHER_CONTROL,
    TRANSACTIONAL,
    DataLog,
    is_value_text,
)
from checkers.families.data_log.segments import DECODED_SUFFIX, SegmentsError, read_decoded
from checkers.families.metadata_log.parse import complete_lines, cut_line_note

_DUMPING = re.compile(r"^Dumping (?:.*/)?((.+)-(\d+)/\d+\.log)$")
_BATCH = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) (?:baseSequence: (-?\d+) )?.*?"
    r"producerId: (-?\d+) "
    r"producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: (true|false) "
    r"isControl: (true|false) .*?(?:position: (\d+) )?CreateTime: (-?\d+) "
)
_RECORD = re.compile(
    r"^\| offset: (\d+) CreateTime: -?\d+ .*?(?: payload: (.*)|endTxnMarker: (\w+) )"
)
_IGNORED = ("Log starting offset:", "Starting offset:")


class DataLogError(Exception):
    """A data log that cannot be read, with the place that shows why."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


def parse_data_log(text: str, node: str, path: str | Path | None = None) -> DataLog:
    name = str(path or f"data/{node}.txt")
    notes: list[str] = []
    return _parse(complete_lines(text, name, notes), node, name, notes)


def read_data_logs(directory: str | Path) -> dict[str, DataLog]:
    """Every broker's log of a run's `data/` directory, by broker name: its decoded rows when
    the decoder wrote them (`<broker>.decoded.json`), else its DumpLogSegments text, read a
    line at a time (a pipelined run's dump is a gigabyte of text per broker)."""
    d = Path(directory)
    out: dict[str, DataLog] = {}
    for p in sorted(d.glob(f"*{DECODED_SUFFIX}")):
        node = p.name[: -len(DECODED_SUFFIX)]
        try:
            out[node] = read_decoded(d, node)
        except SegmentsError as e:
            raise DataLogError(p, None, str(e)) from None
    for p in sorted(d.glob("*.txt")):
        if p.stem in out:
            continue
        notes: list[str] = []
        try:
            with p.open(encoding="utf-8") as f:
                out[p.stem] = _parse(_file_lines(f, p, notes), p.stem, str(p), notes)
        except (OSError, UnicodeDecodeError) as e:
            raise DataLogError(p, None, f"cannot read: {e}") from None
    return dict(sorted(out.items()))


def _file_lines(f: Iterable[str], name: Path, notes: list[str]) -> Iterator[str]:
    """complete_lines of an open file: a last line cut mid-way is dropped, with its note."""
    for line in f:
        if line.endswith("\n"):
            yield line[:-1]
        else:
            notes.append(cut_line_note(name))


class _Partition:
    """One partition's batches as read, column by column, and their records."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, ...]] = []  # BATCH_DTYPE's fields but first, n, pad
        self.lines = array("q")
        self.records: list[tuple[array[int], list[str]]] = []  # per batch: offsets, payloads
        self.markers: list[str | None] = []


def _parse(lines: Iterable[str], node: str, name: str, notes: list[str]) -> DataLog:
    topic: str | None = None
    files: dict[str, int] = {}
    parts: dict[int, _Partition] = {}
    part: _Partition | None = None
    where: tuple[int, int] | None = None  # partition, segment
    bounds: tuple[int, int] | None = None  # the open batch's base and last
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith(_IGNORED):
            continue
        if line.startswith("Dumping "):
            m = _DUMPING.match(line)
            if m is None:
                raise DataLogError(name, lineno, f"not a partition segment: {line[:80]!r}")
            if topic not in (None, m[2]):
                raise DataLogError(name, lineno, f"a second topic {m[2]!r} after {topic!r}")
            topic = m[2]
            where = (int(m[3]), files.setdefault(m[1], len(files)))
            part, bounds = parts.setdefault(where[0], _Partition()), None
            continue
        if m := _BATCH.match(line):
            if where is None or part is None:
                raise DataLogError(name, lineno, "batch before any 'Dumping' line")
            base, last, count, seq, pid, pepoch, epoch, txn, ctl, pos, create = m.groups()
            flags = (TRANSACTIONAL if txn == "true" else 0) | (CONTROL if ctl == "true" else 0)
            part.rows.append(
                (
                    -1 if pos is None else int(pos), int(base), int(last), int(pid),
                    int(create), where[0], where[1], int(epoch),
                    -1 if seq is None else int(seq), int(count), int(pepoch), flags,
                )
            )  # fmt: skip
            part.lines.append(lineno)
            part.records.append((array("q"), []))
            part.markers.append(None)
            bounds = (int(base), int(last))
            continue
        m = _RECORD.match(line)
        if m is None:
            raise DataLogError(name, lineno, f"not a DumpLogSegments line: {line[:80]!r}")
        if bounds is None or part is None:
            raise DataLogError(name, lineno, "record line before any batch header")
        offset = int(m[1])
        if not bounds[0] <= offset <= bounds[1]:
            raise DataLogError(
                name, lineno, f"offset {offset} outside its batch {bounds[0]}..{bounds[1]}"
            )
        if m[3] is not None:
            part.markers[-1] = m[3]
        else:
            offsets, texts = part.records[-1]
            offsets.append(offset)
            texts.append(m[2].strip())
    for p, rows in parts.items():
        _drop_cut_batch(p, rows, topic, name, notes)
    return _arrays(node, topic, parts, list(files), name, notes)


def _drop_cut_batch(
    p: int, part: _Partition, topic: str | None, name: str, notes: list[str]
) -> None:
    """The dump prints every record of a batch it prints: only a cut file lacks some, and
    only its partition's last batch."""
    if not part.rows:
        return
    row = part.rows[-1]
    base, last, control = row[1], row[2], bool(row[11] & CONTROL)
    offsets = part.records[-1][0]
    if (part.markers[-1] is None) if control else len(set(offsets)) < last - base + 1:
        notes.append(
            f"{name}: batch at line {part.lines[-1]} ({topic}-{p} offsets {base}..{last}) "
            "lacks records: file truncated, batch not checked"
        )
        part.rows.pop()
        part.lines.pop()
        part.records.pop()
        part.markers.pop()


def _arrays(
    node: str,
    topic: str | None,
    parts: dict[int, _Partition],
    files: list[str],
    name: str,
    notes: list[str],
) -> DataLog:
    n_batches = sum(len(p.rows) for p in parts.values())
    batches = np.zeros(n_batches, BATCH_DTYPE)
    lines = np.zeros(n_batches, np.int64)
    offsets, values = array("q"), array("q")
    odd: dict[int, str | None] = {}
    i = 0
    for p in sorted(parts):
        part = parts[p]
        for row, line, (offs, texts), marker in zip(
            part.rows, part.lines, part.records, part.markers, strict=True
        ):
            b = batches[i]
            (b["position"], b["base"], b["last"], b["producer_id"], b["create_ms"],
             b["partition"], b["segment"], b["leader_epoch"], b["base_sequence"], b["count"],
             b["producer_epoch"], b["flags"]) = row  # fmt: skip
            if row[11] & CONTROL:
                b["marker"] = MARKER_CODES.get(marker or "", OTHER_CONTROL)
            b["first"] = len(offsets)
            if any(y <= x for x, y in pairwise(offs)):
                # Never printed by a dump; as a dict of offset -> payload: the last read wins.
                held = dict(zip(offs, texts, strict=True))
                offs, texts = array("q", sorted(held)), [held[o] for o in sorted(held)]
            for o, t in zip(offs, texts, strict=True):
                if is_value_text(t):
                    values.append(int(t))
                else:
                    odd[len(offsets)] = t
                    values.append(0)
                offsets.append(o)
            b["n"] = len(offs)
            lines[i] = line
            i += 1
    return DataLog(
        node,
        topic,
        batches,
        np.frombuffer(offsets, dtype=np.int64).copy(),
        np.frombuffer(values, dtype=np.int64).copy(),
        odd,
        files,
        notes,
        text_name=f"{node}.txt",
        lines=lines,
        empty_partitions=tuple(p for p, part in parts.items() if not part.rows),
    )
