"""Reading `data/<broker>.txt`: `kafka-dump-log --deep-iteration --print-data-log` output of the
queue topic's partition segments on one broker.

The shape (Kafka 3.x and 4.x alike): a `Dumping <topic>-<p>/<segment>.log` line per segment,
`Log starting offset: N`, then per batch a header line

    baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1000
    producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false ...
    CreateTime: 1795326812806 size: 76 ...

(one line) followed by one line per record: `| offset: O CreateTime: T ... payload: V` for data,
`| offset: O ... endTxnMarker: COMMIT coordinatorEpoch: C` for a transaction marker.
A file cut short loses only its last batch, with a note; anything else that does not fit is one
DataLogError naming the file and line.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise
from pathlib import Path

from checkers.families.metadata_log.parse import complete_lines, cut_line_note

_DUMPING = re.compile(r"^Dumping (?:.*/)?(.+)-(\d+)/\d+\.log$")
_BATCH = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) (?:baseSequence: (-?\d+) )?.*?"
    r"producerId: (-?\d+) "
    r"producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: (true|false) "
    r"isControl: (true|false) .*?CreateTime: (-?\d+) "
)
_RECORD = re.compile(
    r"^\| offset: (\d+) CreateTime: -?\d+ .*?(?: payload: (.*)|endTxnMarker: (\w+) )"
)
_IGNORED = ("Log starting offset:", "Starting offset:")


class DataLogError(Exception):
    """A decoded data log that cannot be read, with the place that shows why."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


class Payloads(Mapping[int, str]):
    """A batch's payloads by offset, as printed: one string of them all and where each ends.
    A pipelined run's data logs hold millions of records per broker, and a dict of one string
    per record costs ~150 bytes a record where this costs the payload and 16."""

    __slots__ = ("_ends", "_offsets", "_text")

    def __init__(self, offsets: array[int], text: str, ends: array[int]) -> None:
        self._offsets = offsets  # ascending, no repeats
        self._text = text
        self._ends = ends

    @classmethod
    def of(cls, offsets: Sequence[int], texts: Sequence[str]) -> Mapping[int, str]:
        """The payloads in the order read; a repeated or descending offset (which a dump never
        prints) keeps the plain dict's meaning: the last one read wins."""
        if any(b <= a for a, b in pairwise(offsets)):
            return dict(zip(offsets, texts, strict=True))
        return cls(array("q", offsets), "".join(texts), array("q", accumulate(map(len, texts))))

    def _at(self, i: int) -> str:
        return self._text[self._ends[i - 1] if i else 0 : self._ends[i]]

    def __getitem__(self, offset: int) -> str:
        offs = self._offsets
        i = offset - offs[0]
        if not 0 <= i < len(offs) or offs[i] != offset:  # not contiguous from the first
            i = bisect_left(offs, offset)
            if i == len(offs) or offs[i] != offset:
                raise KeyError(offset)
        return self._at(i)

    def __iter__(self) -> Iterator[int]:
        return iter(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


@dataclass
class Batch:
    node: str
    line: int  # 1-based line of the header in the broker's file
    topic: str
    partition: int
    base: int
    last: int
    producer_id: int
    producer_epoch: int
    leader_epoch: int  # partitionLeaderEpoch: stamped by the leader that appended the batch
    transactional: bool
    control: bool
    create_ms: int
    marker: str | None = None  # COMMIT or ABORT, for a control batch
    # offset -> payload as printed (a Payloads, once its parser has read them all)
    payloads: Mapping[int, str] = field(default_factory=dict)
    base_sequence: int | None = None  # baseSequence, when the dump prints it (-1: none)

    def cite(self, path_prefix: str = "data/") -> str:
        what = f"{self.marker} marker" if self.control else f"offsets {self.base}..{self.last}"
        return (
            f"{path_prefix}{self.node}.txt:{self.line} {self.topic}-{self.partition} {what} "
            f"producerId {self.producer_id} producerEpoch {self.producer_epoch} "
            f"partitionLeaderEpoch {self.leader_epoch}"
        )


@dataclass
class DataLog:
    node: str
    topic: str | None = None  # the queue topic (one per run)
    partitions: dict[int, list[Batch]] = field(default_factory=dict)  # in log order
    notes: list[str] = field(default_factory=list)

    # partition -> (its batch count when indexed, their base offsets, or None when they are
    # not in ascending, disjoint order): batch_at is asked once per acknowledged write.
    _index: dict[int, tuple[int, list[int] | None]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def batch_at(self, partition: int, offset: int) -> Batch | None:
        """The first batch of the partition holding the offset."""
        batches = self.partitions.get(partition, ())
        bases = self._bases(partition, batches)
        if bases is None:
            for b in batches:
                if b.base <= offset <= b.last:
                    return b
            return None
        # Ascending and disjoint: the one batch that may hold it is the last starting at or
        # before it.
        i = bisect_right(bases, offset) - 1
        return batches[i] if i >= 0 and offset <= batches[i].last else None

    def _bases(self, partition: int, batches: Sequence[Batch]) -> list[int] | None:
        known = self._index.get(partition)
        if known is not None and known[0] == len(batches):
            return known[1]
        ordered = all(a.last < b.base and a.base <= a.last for a, b in pairwise(batches))
        bases = [b.base for b in batches] if ordered else None
        self._index[partition] = (len(batches), bases)
        return bases


def parse_data_log(text: str, node: str, path: str | Path | None = None) -> DataLog:
    name = path or f"data/{node}.txt"
    log = DataLog(node)
    return _parse(complete_lines(text, name, log.notes), log, name)


def read_data_logs(directory: str | Path) -> dict[str, DataLog]:
    """Every `<broker>.txt` of a run's `data/` directory, by broker name, each read a line at
    a time: a pipelined run's dump is a gigabyte of text per broker."""
    out = {}
    for p in sorted(Path(directory).glob("*.txt")):
        log = DataLog(p.stem)
        try:
            with p.open(encoding="utf-8") as f:
                out[p.stem] = _parse(_file_lines(f, p, log.notes), log, p)
        except (OSError, UnicodeDecodeError) as e:
            raise DataLogError(p, None, f"cannot read: {e}") from None
    return out


def _file_lines(f: Iterable[str], name: Path, notes: list[str]) -> Iterator[str]:
    """complete_lines of an open file: a last line cut mid-way is dropped, with its note."""
    for line in f:
        if line.endswith("\n"):
            yield line[:-1]
        else:
            notes.append(cut_line_note(name))


def _parse(lines: Iterable[str], log: DataLog, name: str | Path) -> DataLog:
    node = log.node
    where: tuple[str, int] | None = None
    batch: Batch | None = None
    offsets: list[int] = []  # the open batch's records, until its payloads are sealed
    texts: list[str] = []

    def seal() -> None:
        if batch is not None and offsets:
            batch.payloads = Payloads.of(offsets, texts)
            offsets.clear()
            texts.clear()

    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith(_IGNORED):
            continue
        if line.startswith("Dumping "):
            m = _DUMPING.match(line)
            if m is None:
                raise DataLogError(name, lineno, f"not a partition segment: {line[:80]!r}")
            seal()
            where, batch = (m[1], int(m[2])), None
            if log.topic not in (None, m[1]):
                raise DataLogError(name, lineno, f"a second topic {m[1]!r} after {log.topic!r}")
            log.topic = m[1]
            log.partitions.setdefault(where[1], [])
            continue
        if m := _BATCH.match(line):
            if where is None:
                raise DataLogError(name, lineno, "batch before any 'Dumping' line")
            seal()
            base, last, _n, seq, pid, pepoch, epoch, txn, ctl, create = m.groups()
            batch = Batch(
                node, lineno, where[0], where[1], int(base), int(last), int(pid), int(pepoch),
                int(epoch), txn == "true", ctl == "true", int(create),
                base_sequence=None if seq is None else int(seq),
            )  # fmt: skip
            log.partitions[where[1]].append(batch)
            continue
        m = _RECORD.match(line)
        if m is None:
            raise DataLogError(name, lineno, f"not a DumpLogSegments line: {line[:80]!r}")
        if batch is None:
            raise DataLogError(name, lineno, "record line before any batch header")
        offset = int(m[1])
        if not batch.base <= offset <= batch.last:
            raise DataLogError(
                name, lineno, f"offset {offset} outside its batch {batch.base}..{batch.last}"
            )
        if m[3] is not None:
            batch.marker = m[3]
        else:
            offsets.append(offset)
            texts.append(m[2].strip())
    seal()
    for batches in log.partitions.values():
        b = batches[-1] if batches else None
        incomplete = b is not None and (
            b.marker is None if b.control else len(b.payloads) < b.last - b.base + 1
        )
        if b is not None and incomplete:
            # The dump prints every record of a batch it prints: only a cut file lacks some.
            batches.pop()
            log.notes.append(
                f"{name}: batch at line {b.line} ({b.topic}-{b.partition} offsets "
                f"{b.base}..{b.last}) lacks records: file truncated, batch not checked"
            )
    return log
