"""The binary side files a JVM records operations into (docs/history.md, "Sends recorded in the
JVM", "Final reads"): fixed-width little-endian records, read with numpy whole columns at a time.

A run's `jvm-sends/` holds, per writer (a worker slot `slot<s>`, the final reads `final`):

- `<name>.ops`: a 32-byte file header, then records of one fixed width. A file whose size past
  the header is not a whole number of records has a torn tail (its writer killed mid-record):
  the part record is dropped and said, never fatal.
- `<name>.strings`: the texts records name (node names, error texts), one JSON string per line;
  a record names line i by the int i (-1: none). A writer appends a text and writes it out
  before the first record naming it enters its buffer, so every text a record on disk names is
  on disk too; a torn last line is one no record names.

Two record layouts, told apart by the header's tag:

- sends (`SEND_DTYPE`, 64 bytes): one op each, the history's own fields: `time` (ns, the
  history's clock), `wall_us` (Unix µs), `process`, `producer`, `value`, `offset` (-1: null;
  ok only), `key`, `error` and `node` (string indices, -1: none), `type` (TYPE_CODES). The op
  is `f` = send, its value `[["send", key, value]]`, or `[["send", key, [offset, value]]]` ok.
- polls (`POLL_DTYPE`, 32 bytes): an op record (`kind` 1: `a` time, `b` wall_us, `c` process,
  `type`, `error`) or an element record (`kind` 0: `a` key, `b` offset, `c` value). An ok
  poll's elements come just before its op record, in the order read (one partition's records
  together): its value is `[["poll", {"<key>": [[offset, value], ...], ...}]]`; other poll ops
  have none and the value `[["poll"]]`. Elements after the last op record are a poll cut short
  by its writer's death: dropped and said, as a torn tail.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from history import strict_json
from history.errors import HistoryError
from history.format import FAIL, INFO, INVOKE, OK

OPS_SUFFIX = ".ops"
STRINGS_SUFFIX = ".strings"
MAGIC = b"KCHAOS"
SENDS_TAG, POLLS_TAG = b"SE", b"PO"
VERSION = 1
HEADER = struct.Struct("<6s2sII16x")  # magic, tag, version, record size
HEADER_SIZE = HEADER.size  # 32
TYPES = (INVOKE, OK, FAIL, INFO)
TYPE_CODES = {t: i for i, t in enumerate(TYPES)}
ELEMENT, OP = 0, 1  # a poll record's kind

SEND_DTYPE = np.dtype(
    [
        ("time", "<i8"),
        ("wall_us", "<i8"),
        ("process", "<i8"),
        ("producer", "<i8"),
        ("value", "<i8"),
        ("offset", "<i8"),
        ("key", "<i4"),
        ("error", "<i4"),
        ("node", "<i4"),
        ("type", "u1"),
        ("_pad", "V3"),
    ]
)
POLL_DTYPE = np.dtype(
    [
        ("a", "<i8"),
        ("b", "<i8"),
        ("c", "<i8"),
        ("error", "<i4"),
        ("type", "u1"),
        ("kind", "u1"),
        ("_pad", "V2"),
    ]
)
assert SEND_DTYPE.itemsize == 64 and POLL_DTYPE.itemsize == 32
# One send record as bytes (SEND_DTYPE's fields in order), for a writer of one op at a time.
SEND_RECORD = struct.Struct("<qqqqqqiiiB3x")
assert SEND_RECORD.size == SEND_DTYPE.itemsize
LAYOUTS = {SENDS_TAG: SEND_DTYPE, POLLS_TAG: POLL_DTYPE}


def header_bytes(tag: bytes) -> bytes:
    return HEADER.pack(MAGIC, tag, VERSION, LAYOUTS[tag].itemsize)


@dataclass
class SideFile:
    """One `.ops` file as far as it is whole: its layout tag, its records (`count` of them,
    read a range at a time by `read`), the strings they name, and whether a torn tail was
    dropped."""

    path: Path
    tag: bytes
    count: int
    strings: list[str] = field(default_factory=list)
    torn: bool = False

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def dtype(self) -> np.dtype:
        return LAYOUTS[self.tag]

    def read(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Records [start, stop) (a plain read, not a mapping: nothing of it stays resident
        once the caller drops it)."""
        stop = self.count if stop is None else min(stop, self.count)
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        with self.path.open("rb") as f:
            f.seek(HEADER_SIZE + start * self.dtype.itemsize)
            return np.fromfile(f, dtype=self.dtype, count=stop - start)

    def chunks(self, rows: int) -> list[tuple[int, int]]:
        return [(s, min(s + rows, self.count)) for s in range(0, self.count, rows)]

    def error(self, record: int | None, msg: str) -> HistoryError:
        where = None if record is None else record + 1
        return HistoryError(self.path, where, msg)


def open_side(path: str | Path, read_rows: int = 1 << 20) -> SideFile:
    """The side file at `path` and its strings, its torn tail (if any) left out. A file too
    short for its header, or empty, has no records. HistoryError for a header that is not a
    side file's, a text that is not a JSON string; errors name the record (1-based) where
    one is wrong."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as f:
            head = f.read(HEADER_SIZE)
    except OSError as e:
        raise HistoryError(p, None, f"cannot read: {e.strerror or e}") from None
    strings = _strings(p.with_suffix(STRINGS_SUFFIX))
    if len(head) < HEADER_SIZE:
        # Killed before its first buffer reached the file: a tag from the name.
        tag = POLLS_TAG if p.stem == "final" else SENDS_TAG
        return SideFile(p, tag, 0, strings, torn=bool(head))
    magic, tag, version, width = HEADER.unpack(head)
    if magic != MAGIC or tag not in LAYOUTS:
        raise HistoryError(p, None, "not a kchaos side file (its header)")
    if version != VERSION or width != LAYOUTS[tag].itemsize:
        raise HistoryError(p, None, f"side file version {version} is not one this reader knows")
    body = size - HEADER_SIZE
    side = SideFile(p, tag, body // width, strings, torn=body % width != 0)
    if tag == POLLS_TAG and side.count:
        # Elements after the last op record: a poll whose op never reached the file.
        last, end = 0, side.count
        while end > 0:
            start = max(0, end - read_rows)
            ops = np.flatnonzero(side.read(start, end)["kind"] == OP)
            if len(ops):
                last = start + int(ops[-1]) + 1
                break
            end = start
        if last < side.count:
            side.count, side.torn = last, True
    return side


def _strings(path: Path) -> list[str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from None
    lines = data.split(b"\n")[:-1]  # a torn last line is named by no record
    out = []
    for n, line in enumerate(lines, start=1):
        try:
            s = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            s = None
        if not isinstance(s, str):
            raise HistoryError(path, n, "not a JSON string")
        out.append(s)
    return out


def side_files(side_dir: str | Path) -> list[Path]:
    """The `.ops` files of a run's side directory: the slots' in slot order, then the final
    reads' (written last)."""
    d = Path(side_dir)
    if not d.is_dir():
        return []
    return sorted(
        d.glob(f"*{OPS_SUFFIX}"),
        key=lambda p: (not p.name.startswith("slot"), len(p.name), p.name),
    )


def highest_process(path: str | Path) -> int | None:
    """The highest process id a side file's ops name (for a JVM that died before saying)."""
    side = open_side(path)
    best = None
    for start, stop in side.chunks(1 << 20):
        recs = side.read(start, stop)
        procs = recs["c"][recs["kind"] == OP] if side.tag == POLLS_TAG else recs["process"]
        if len(procs):
            top = int(procs.max())
            best = top if best is None else max(best, top)
    return best


# Writing (tests, benches, and the harness's own recorder of sends) -----------------------------
class SideWriter:
    """Appends records and strings to a side file from Python: what the JVM's SideWriter.java
    writes, byte for byte (the harness's recorder of pipelined sends, tests, benches). Records
    reach the file when its buffer fills and at `flush`; a text reaches its file at once."""

    def __init__(self, path: str | Path, tag: bytes) -> None:
        self.path = Path(path)
        self.tag = tag
        self._ops = self.path.open("ab")
        if self._ops.tell() == 0:
            self._ops.write(header_bytes(tag))
        self._strings_file = self.path.with_suffix(STRINGS_SUFFIX).open("ab")
        self._index: dict[str, int] = {}

    def string(self, s: str | None) -> int:
        """The index of `s` in the strings file, written out now if new; -1 for None."""
        if s is None:
            return -1
        i = self._index.get(s)
        if i is None:
            i = self._index[s] = len(self._index)
            self._strings_file.write(strict_json.dumps(s, ensure_ascii=False).encode() + b"\n")
            self._strings_file.flush()
        return i

    def write(self, records: np.ndarray) -> None:
        self._ops.write(records.astype(LAYOUTS[self.tag], copy=False).tobytes())

    def write_bytes(self, record: bytes) -> None:
        """One record already packed (SEND_RECORD)."""
        self._ops.write(record)

    def flush(self) -> None:
        self._ops.flush()

    def close(self) -> None:
        self._ops.close()
        self._strings_file.close()


def send_records(n: int) -> np.ndarray:
    """`n` zeroed send records, their string fields and offset none."""
    out = np.zeros(n, dtype=SEND_DTYPE)
    out["offset"] = out["error"] = out["node"] = -1
    return out


def poll_records(n: int) -> np.ndarray:
    out = np.zeros(n, dtype=POLL_DTYPE)
    out["error"] = -1
    return out
