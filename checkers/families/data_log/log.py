"""One broker's final logs of the queue topic as arrays: a row per batch, a row per data record.

Both ways a run's data logs are stored give this: the decoder's binary rows (segments.py, every
run since issue 28) and DumpLogSegments text (parse.py: older runs, and hand-written cases).
Batches are in partition order, each partition's in log order; a batch's data records are
`first .. first + n` of the record arrays, in offset order. A payload that is not a decimal
int64 as Python writes one (`str(int)`) is no kchaos value: its row is flagged `odd`, its text
kept (when known) for the evidence, and it never equals a sent value.

The checks ask the arrays for many sends at once (`batches_at`, `records_at`); a finding's few
batches become `Batch` objects, which cite the file and place that hold them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

# The decoder's batch row (clusters/java/KchaosSegments.java), field for field, little-endian.
BATCH_DTYPE = np.dtype(
    [
        ("position", "<i8"),  # in its segment file (-1: unknown, a text without positions)
        ("base", "<i8"),
        ("last", "<i8"),
        ("producer_id", "<i8"),
        ("create_ms", "<i8"),  # the batch's max timestamp, as DumpLogSegments prints it
        ("first", "<i8"),  # its first data record's row
        ("partition", "<i4"),
        ("segment", "<i4"),  # index into DataLog.files
        ("leader_epoch", "<i4"),  # partitionLeaderEpoch: stamped by the appending leader
        ("base_sequence", "<i4"),  # -1: none (or not printed)
        ("count", "<i4"),  # the header's record count (-1: not given)
        ("n", "<i4"),  # data record rows (0 for a control batch)
        ("producer_epoch", "<i2"),
        ("flags", "u1"),
        ("marker", "i1"),
        ("pad", "<i4"),
    ]
)
RECORD_DTYPE = np.dtype([("offset", "<i8"), ("value", "<i8")])
assert BATCH_DTYPE.itemsize == 80 and RECORD_DTYPE.itemsize == 16

TRANSACTIONAL, CONTROL, CRC_MISMATCH, LOG_APPEND_TIME = 1, 2, 4, 8
NO_MARKER, COMMIT, ABORT, OTHER_CONTROL = 0, 1, 2, 3
MARKERS = {COMMIT: "COMMIT", ABORT: "ABORT", OTHER_CONTROL: "control"}
MARKER_CODES = {"COMMIT": COMMIT, "ABORT": ABORT}

# Query keys pack (partition, offset) into one int64: offsets below 2^40, partitions below 2^23.
_SHIFT = 40
_MAX_OFFSET = 1 << _SHIFT
_MAX_PARTITION = 1 << 22


def is_value_text(text: str) -> bool:
    """Whether a payload's text is a decimal int64 as `str(int)` writes it (a kchaos value)."""
    if not text or (text[0] == "-" and text[1:2] in ("", "0")) or (text[0] == "0" and text != "0"):
        return False
    body = text[1:] if text[0] == "-" else text
    if not (body.isascii() and body.isdigit()):
        return False
    return -(1 << 63) < int(text) < (1 << 63)


@dataclass(eq=False)
class DataLog:
    """One broker's final logs of the queue topic (one topic per run). Compared by identity:
    `distinct` says whether two hold the same batches and records."""

    node: str
    topic: str | None
    batches: np.ndarray  # BATCH_DTYPE, partition order, then log order
    offsets: np.ndarray  # int64 per data record
    values: np.ndarray  # int64 per data record (0 where odd)
    odd: dict[int, str | None] = field(default_factory=dict)  # record row -> payload text
    files: list[str] = field(default_factory=list)  # segment files, `<topic>-<p>/<name>.log`
    notes: list[str] = field(default_factory=list)
    # Where a batch is cited: None for the decoder's rows (`data/<node>-raw/<file> position P`);
    # the text's name and each batch's header line for a DumpLogSegments text.
    text_name: str | None = None
    lines: np.ndarray | None = None
    empty_partitions: tuple[int, ...] = ()  # partitions whose files hold no batch

    def __len__(self) -> int:
        return len(self.batches)

    # -- columns -------------------------------------------------------------------------------
    @cached_property
    def partition(self) -> np.ndarray:
        return np.ascontiguousarray(self.batches["partition"])

    @cached_property
    def base(self) -> np.ndarray:
        return np.ascontiguousarray(self.batches["base"])

    @cached_property
    def last(self) -> np.ndarray:
        return np.ascontiguousarray(self.batches["last"])

    @cached_property
    def producer_id(self) -> np.ndarray:
        return np.ascontiguousarray(self.batches["producer_id"])

    @cached_property
    def producer_epoch(self) -> np.ndarray:
        return self.batches["producer_epoch"].astype(np.int64)

    @cached_property
    def leader_epoch(self) -> np.ndarray:
        return np.ascontiguousarray(self.batches["leader_epoch"])

    @cached_property
    def control(self) -> np.ndarray:
        return (self.batches["flags"] & CONTROL) != 0

    @cached_property
    def transactional(self) -> np.ndarray:
        return (self.batches["flags"] & TRANSACTIONAL) != 0

    @cached_property
    def marker(self) -> np.ndarray:
        return np.ascontiguousarray(self.batches["marker"])

    @cached_property
    def first(self) -> np.ndarray:
        return np.ascontiguousarray(self.batches["first"])

    @cached_property
    def n(self) -> np.ndarray:
        return self.batches["n"].astype(np.int64)

    @cached_property
    def odd_mask(self) -> np.ndarray | None:
        """True for each record whose payload is not a value; None when there is none."""
        if not self.odd:
            return None
        mask = np.zeros(len(self.offsets), dtype=bool)
        mask[np.fromiter(self.odd, dtype=np.int64, count=len(self.odd))] = True
        return mask

    @cached_property
    def record_batch(self) -> np.ndarray:
        """The batch row of each data record."""
        return np.repeat(np.arange(len(self.batches), dtype=np.int64), self.n)

    # -- partitions ----------------------------------------------------------------------------
    @cached_property
    def partition_ids(self) -> list[int]:
        """Every partition the log has a file of, ascending."""
        return sorted({*map(int, np.unique(self.partition)), *self.empty_partitions})

    def rows_of(self, partition: int) -> range:
        """The batch rows of one partition, in log order."""
        lo, hi = np.searchsorted(self.partition, [partition, partition + 1])
        return range(int(lo), int(hi))

    @cached_property
    def _ordered(self) -> bool:
        """Each partition's batches ascending and disjoint: one search finds any offset."""
        b = self.batches
        if not len(b):
            return True
        if b["base"].max(initial=0) >= _MAX_OFFSET or b["partition"].max() >= _MAX_PARTITION:
            return False
        same = self.partition[1:] == self.partition[:-1]
        return bool(
            np.all(self.base <= self.last)
            and np.all(~same | (self.last[:-1] < self.base[1:]))
            and np.all(np.diff(self.partition) >= 0)
        )

    @cached_property
    def _keys(self) -> np.ndarray:
        return (self.partition.astype(np.int64) << _SHIFT) | self.base

    # -- lookups -------------------------------------------------------------------------------
    def batches_at(self, partitions: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """For each (partition, offset), the row of the first batch of the partition holding
        the offset, or -1."""
        partitions = np.asarray(partitions, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        out = np.full(len(offsets), -1, dtype=np.int64)
        if not len(self.batches) or not len(offsets):
            return out
        if not self._ordered:
            for i, (p, o) in enumerate(zip(partitions.tolist(), offsets.tolist(), strict=True)):
                out[i] = self._scan(p, o)
            return out
        inside = (offsets >= 0) & (offsets < _MAX_OFFSET) & (partitions >= 0)
        inside &= partitions < _MAX_PARTITION
        q = (partitions[inside] << _SHIFT) | offsets[inside]
        i = np.searchsorted(self._keys, q, side="right") - 1
        ok = i >= 0
        i = np.where(ok, i, 0)
        ok &= (self.partition[i] == partitions[inside]) & (offsets[inside] <= self.last[i])
        out[inside] = np.where(ok, i, -1)
        return out

    def _scan(self, partition: int, offset: int) -> int:
        for r in self.rows_of(partition):
            if self.base[r] <= offset <= self.last[r]:
                return r
        return -1

    @cached_property
    def _record_keys(self) -> np.ndarray | None:
        """(partition, offset) of every data record packed as in `_keys`, when they ascend
        (an ordered log whose batches' records ascend): one search then finds any record."""
        if not self._ordered or not len(self.offsets):
            return None
        parts = np.repeat(self.partition.astype(np.int64), self.n)
        keys = (parts << _SHIFT) | self.offsets
        del parts
        return keys if bool(np.all(keys[1:] > keys[:-1])) else None

    def locate(self, partitions: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each (partition, offset): the row of the data record there (-1: none), and the
        row of the first batch of the partition holding the offset (-1: none). A record is
        found by one search over every record; only an offset holding none (a marker's, or
        one past the log) is looked for among the batches."""
        partitions = np.asarray(partitions, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        keys = self._record_keys
        if keys is None:
            rows = self.batches_at(partitions, offsets)
            return self.records_at(rows, offsets), rows
        inside = (offsets >= 0) & (offsets < _MAX_OFFSET) & (partitions >= 0)
        inside &= partitions < _MAX_PARTITION
        q = np.where(inside, (partitions << _SHIFT) | np.where(inside, offsets, 0), -1)
        at = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
        hit = keys[at] == q
        records = np.where(hit, at, -1)
        # A record's batch: the last batch starting at or before it (a control batch holds no
        # record, and starts where the next data batch's records do: it comes before that one).
        rows = np.where(hit, np.searchsorted(self.first, at, side="right") - 1, -1)
        miss = np.flatnonzero(~hit)
        if len(miss):
            rows[miss] = self.batches_at(partitions[miss], offsets[miss])
        return records, rows

    def records_at(self, rows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """For each (batch row, offset), the row of the batch's data record at the offset,
        or -1 (no batch, a control batch, or no record there)."""
        rows = np.asarray(rows, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        out = np.full(len(rows), -1, dtype=np.int64)
        have = rows >= 0
        if not have.any() or not len(self.offsets):
            return out
        r = np.where(have, rows, 0)
        first, n, base = self.first[r], self.n[r], self.base[r]
        delta = offsets - base
        # A batch's records are at base, base+1, ...: the record is at its place, unless the
        # batch has gaps (compaction), which a search inside the batch then finds.
        direct = have & (delta >= 0) & (delta < n)
        j = np.where(direct, first + np.clip(delta, 0, None), 0)
        j = np.minimum(j, len(self.offsets) - 1)
        hit = direct & (self.offsets[j] == offsets)
        out[hit] = j[hit]
        for k in np.flatnonzero(have & ~hit & (n > 0)).tolist():
            lo, hi = int(first[k]), int(first[k] + n[k])
            at = lo + int(np.searchsorted(self.offsets[lo:hi], offsets[k]))
            if at < hi and self.offsets[at] == offsets[k]:
                out[k] = at
        return out

    def holds(self, records: np.ndarray, values: np.ndarray) -> np.ndarray:
        """For each record row (-1: none) and value: the record's payload is that value."""
        records = np.asarray(records, dtype=np.int64)
        ok = records >= 0
        j = np.where(ok, records, 0)
        if not len(self.values):
            return np.zeros(len(records), dtype=bool)
        ok &= self.values[j] == np.asarray(values, dtype=np.int64)
        mask = self.odd_mask
        if mask is not None:
            ok &= ~mask[j]
        return ok

    def payload(self, record: int) -> str:
        """A record's payload as printed: the value, or the odd payload's text."""
        if record in self.odd:
            text = self.odd[record]
            return "<not kept>" if text is None else text
        return str(int(self.values[record]))

    # -- batches as objects, for findings ------------------------------------------------------
    def batch(self, row: int) -> Batch:
        views = self._views
        b = views.get(row)
        if b is None:
            b = views[row] = Batch(self, int(row))
        return b

    @cached_property
    def _views(self) -> dict[int, Batch]:
        return {}

    @property
    def partitions(self) -> dict[int, list[Batch]]:
        """Every batch as an object, by partition: for small logs (tests, the reference rules)."""
        return {p: [self.batch(r) for r in self.rows_of(p)] for p in self.partition_ids}

    def batch_at(self, partition: int, offset: int) -> Batch | None:
        """The first batch of the partition holding the offset."""
        r = int(self.batches_at(np.array([partition]), np.array([offset]))[0])
        return None if r < 0 else self.batch(r)

    def cite_prefix(self, row: int, path_prefix: str = "data/") -> str:
        if self.text_name is not None:
            assert self.lines is not None
            return f"{path_prefix}{self.text_name}:{int(self.lines[row])}"
        b = self.batches[row]
        return (
            f"{path_prefix}{self.node}-raw/{self.files[int(b['segment'])]} position {b['position']}"
        )


class Batch:
    """One batch of a DataLog, as the findings quote it."""

    __slots__ = ("log", "row")

    def __init__(self, log: DataLog, row: int) -> None:
        self.log = log
        self.row = row

    def _f(self, name: str) -> int:
        return int(self.log.batches[self.row][name])

    @property
    def node(self) -> str:
        return self.log.node

    @property
    def topic(self) -> str:
        return self.log.topic or ""

    @property
    def partition(self) -> int:
        return self._f("partition")

    @property
    def base(self) -> int:
        return self._f("base")

    @property
    def last(self) -> int:
        return self._f("last")

    @property
    def producer_id(self) -> int:
        return self._f("producer_id")

    @property
    def producer_epoch(self) -> int:
        return self._f("producer_epoch")

    @property
    def leader_epoch(self) -> int:
        return self._f("leader_epoch")

    @property
    def transactional(self) -> bool:
        return bool(self._f("flags") & TRANSACTIONAL)

    @property
    def control(self) -> bool:
        return bool(self._f("flags") & CONTROL)

    @property
    def create_ms(self) -> int:
        return self._f("create_ms")

    @property
    def marker(self) -> str | None:
        return MARKERS.get(self._f("marker"))

    @property
    def base_sequence(self) -> int | None:
        s = self._f("base_sequence")
        return None if s < 0 else s

    @property
    def position(self) -> int:
        return self._f("position")

    @property
    def payloads(self) -> Mapping[int, str]:
        """Offset -> payload as printed, for the batch's data records."""
        return Payloads(self.log, self._f("first"), self._f("n"))

    def values(self) -> list[int]:
        """The batch's payloads that are values, in offset order."""
        lo, hi = self._f("first"), self._f("first") + self._f("n")
        return [
            int(v)
            for i, v in enumerate(self.log.values[lo:hi].tolist())
            if lo + i not in self.log.odd
        ]

    def cite(self, path_prefix: str = "data/") -> str:
        what = f"{self.marker} marker" if self.control else f"offsets {self.base}..{self.last}"
        return (
            f"{self.log.cite_prefix(self.row, path_prefix)} {self.topic}-{self.partition} {what} "
            f"producerId {self.producer_id} producerEpoch {self.producer_epoch} "
            f"partitionLeaderEpoch {self.leader_epoch}"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Batch) and other.log is self.log and other.row == self.row

    def __hash__(self) -> int:
        return hash((id(self.log), self.row))

    def __repr__(self) -> str:
        return f"Batch({self.cite()})"


class Payloads(Mapping[int, str]):
    """A batch's payloads by offset, read from its log's record arrays."""

    __slots__ = ("_first", "_log", "_n")

    def __init__(self, log: DataLog, first: int, n: int) -> None:
        self._log, self._first, self._n = log, first, n

    def _row(self, offset: int) -> int:
        offs = self._log.offsets
        lo, hi = self._first, self._first + self._n
        at = lo + int(np.searchsorted(offs[lo:hi], offset))
        if at < hi and offs[at] == offset:
            return at
        raise KeyError(offset)

    def __getitem__(self, offset: int) -> str:
        return self._log.payload(self._row(offset))

    def __iter__(self) -> Iterator[int]:
        return iter(self._log.offsets[self._first : self._first + self._n].tolist())

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def empty_log(node: str) -> DataLog:
    return DataLog(
        node, None, np.zeros(0, BATCH_DTYPE), np.zeros(0, np.int64), np.zeros(0, np.int64)
    )


def producer_groups(log: DataLog, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`rows` (batch rows, ascending) ordered by (partition, producerId), log order within:
    (that order, each row's group number there). A partition's producer's batches are one
    group, as a per-partition walk keyed by producer id sees them."""
    rows = np.asarray(rows, dtype=np.int64)
    order = rows[np.lexsort((rows, log.producer_id[rows], log.partition[rows]))]
    if not len(order):
        return order, np.zeros(0, np.int64)
    p, pid = log.partition[order], log.producer_id[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = (p[1:] != p[:-1]) | (pid[1:] != pid[:-1])
    return order, np.cumsum(starts) - 1


# The batch fields a log's records and lookups depend on (not where a copy sits in its files).
_CONTENT = [n for n in BATCH_DTYPE.names if n not in ("position", "segment", "pad")]


def distinct(logs: dict[str, DataLog]) -> list[DataLog]:
    """The logs, less each one whose batches and records are those of an earlier one: a
    follower that caught up holds its leader's log again, and a pass whose result is the union
    over the logs (or the first log's) need not read it twice."""
    out: list[DataLog] = []
    for log in logs.values():
        if not any(_same(log, seen) for seen in out):
            out.append(log)
    return out


def _same(a: DataLog, b: DataLog) -> bool:
    if len(a) != len(b) or len(a.offsets) != len(b.offsets) or a.odd != b.odd:
        return False
    return (
        all(np.array_equal(a.batches[f], b.batches[f]) for f in _CONTENT)
        and np.array_equal(a.offsets, b.offsets)
        and np.array_equal(a.values, b.values)
    )
