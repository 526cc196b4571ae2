"""Merging the sends a JVM recorded (JSONL side files) into the run's `history.jsonl`.

kchaos's JVM now records binary side files, from which history/build.py builds history.parquet
without a merged JSONL; this merge remains for runs recorded before (a run killed before its
merge, checked with a newer kchaos) and as the reference the build is tested against.

With `--client java --send-mode async` the worker slots' producers run in the Java client's JVM
and write their own send operations into side files (docs/history.md, "Sends recorded in the
JVM"): one file per slot, each line an op in the history's shape without `index`, `time` first
(`{"time":T,"type":...}`), times on the history's own clock (the recorder's start subtracted
from CLOCK_MONOTONIC, which both sides read). With `--client java` the final reads' polls are
written so too, into `final.jsonl` (docs/history.md, "Final reads"). The harness's recorder
writes everything else (nemesis, observer, the librdkafka client's final reads) into
`history.jsonl` as before.

`merge` makes one history of them: every op of every input, ordered by `time` (ties keep each
input's own order, the main history's before side files'), indices renumbered 0, 1, 2, … in
the new order. Nothing outside the history names an op index before the merge (nemesis.json,
migration.json, upgrade.json and run.json name steps, times and counts, never indices), so
renumbering leaves every other artifact as true as it was. Each input is in time order (each
writer takes the time under the lock it writes under), and an op's invocation and completion
are in one input, invocation first, so the merged history keeps every invocation before its
completion.

A torn last line of any input (its writer killed mid-line) is dropped and said in the merged
header (`jvm_sends.torn`, `jvm_sends.history_torn`), which the reader turns into notes beside
the verdict, as it does for a torn `history.jsonl`; any other line that does not parse is one
HistoryError naming the file and line.

`merge_run` does it in place for a run directory, crash-safely: the merged history is written
beside the old one and renamed over it, and only then are the side files removed; a merged
header (`jvm_sends`) marks a history whose side files are left over from a merge cut short.
"""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from history import strict_json
from history.errors import HistoryError
from history.format import (
    FORMAT_VERSION,
    HEADER_KEY,
    JSONL_NAME,
    JVM_SENDS_DIR,
    JVM_SENDS_FIELD,
    SIDE_SUFFIX,
)

_SIDE_HEAD = b'{"time":'
_INDEX_HEAD = re.compile(rb'\{"index":-?\d+,')
_PROCESS = re.compile(rb'"process":(-?\d+)')
_encode = strict_json.encoder(separators=(",", ":"))
# How long a merge waits for a side file's writer (a JVM still flushing after its harness died)
# to let go of the file's lock.
LOCK_WAIT_S = 30.0
_WRITE_BATCH = 4096


@dataclass
class Source:
    """One input of a merge: its lines (each ending in a newline but perhaps the last), and
    whether that last line is torn (no newline), which a file's last byte says up front."""

    name: str
    lines: Iterable[bytes]
    torn: bool = False

    @classmethod
    def of(cls, name: str, data: bytes) -> Source:
        """An input held in memory (tests)."""
        return cls(name, data.splitlines(keepends=True), bool(data) and not data.endswith(b"\n"))


@dataclass
class SideFilesTaken:
    """What joining side files to a history did (a merge, or history/build.py's build): ops
    written, the side files and their ops, what it had to drop; the header's ``jvm_sends``."""

    ops: int = 0
    side_ops: int = 0
    files: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    history_torn: bool = False

    def header_field(self) -> dict[str, Any]:
        out: dict[str, Any] = {"files": self.files}
        if self.torn:
            out["torn"] = self.torn
        if self.history_torn:
            out["history_torn"] = True
        return out


@dataclass
class Merged(SideFilesTaken):
    """What a merge did."""

    # Inputs whose times went back somewhere (never expected: each writer takes the time under
    # its write lock); their ops keep their own order in the merged history.
    unordered: list[str] = field(default_factory=list)


def merge(main: Source, sides: Sequence[Source], write: Callable[[bytes], object]) -> Merged:
    """Merges the main history (header first) and the side files into one history, written
    through `write` in chunks of whole lines. HistoryError for a line that does not parse."""
    done = Merged(
        files=[s.name for s in sides],
        torn=[s.name for s in sides if s.torn],
        history_torn=main.torn,
    )
    lines = iter(main.lines)
    first = next(lines, b"")
    if not first.endswith(b"\n"):
        raise HistoryError(main.name, 1, "no whole header line: the run died before writing it")
    header = read_header_line(main.name, first)
    if JVM_SENDS_FIELD in header:
        raise HistoryError(main.name, 1, "its JVM-recorded sends were merged already")
    header[JVM_SENDS_FIELD] = done.header_field()
    write(_encode(header).encode() + b"\n")
    streams = [_main_ops(main, lines, done)]
    streams += [_side_ops(s, done) for s in sides]
    index = 0
    batch: list[bytes] = []
    for _, rest in heapq.merge(*streams, key=itemgetter(0)):
        batch.append(b'{"index":%d,%s' % (index, rest))
        index += 1
        if len(batch) >= _WRITE_BATCH:
            write(b"".join(batch))
            batch.clear()
    if batch:
        write(b"".join(batch))
    done.ops = index
    return done


def read_header_line(name: str, line: bytes) -> dict[str, Any]:
    try:
        header = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise HistoryError(name, 1, "the header is not JSON") from None
    if not isinstance(header, dict) or header.get(HEADER_KEY) != FORMAT_VERSION:
        raise HistoryError(name, 1, f"not a kchaos history header of format {FORMAT_VERSION}")
    return header


def _main_ops(src: Source, lines: Iterator[bytes], done: Merged) -> Iterator[tuple[int, bytes]]:
    """(time, the line after its index) of each op of the main history."""
    last = None
    for lineno, line in enumerate(lines, start=2):
        if not line.endswith(b"\n"):
            return  # torn: said in the header already
        try:
            op = json.loads(line)
            t = op["time"]
        except (ValueError, UnicodeDecodeError, TypeError, KeyError):
            raise HistoryError(src.name, lineno, "not an op line with a time") from None
        if not isinstance(t, int) or isinstance(t, bool):
            raise HistoryError(src.name, lineno, f"'time' is {t!r:.40}, expected an int")
        m = _INDEX_HEAD.match(line)
        if m is not None:
            rest = line[m.end() :]
        else:  # not as the recorder writes them: the op re-encoded without its index
            op.pop("index", None)
            rest = _encode(op).encode()[1:] + b"\n" if op else b"}\n"
        if last is not None and t < last and src.name not in done.unordered:
            done.unordered.append(src.name)
        last = t
        yield t, rest


def _side_ops(src: Source, done: Merged) -> Iterator[tuple[int, bytes]]:
    """(time, the line after its opening brace) of each op of a side file."""
    last = None
    for lineno, line in enumerate(src.lines, start=1):
        if not line.endswith(b"\n"):
            return  # torn: said in the header already
        comma = line.find(b",", 8)
        if not line.startswith(_SIDE_HEAD) or comma < 0 or not line.endswith(b"}\n"):
            raise HistoryError(src.name, lineno, 'not a side-file op line ({"time":T,...})')
        try:
            t = int(line[8:comma])
        except ValueError:
            raise HistoryError(src.name, lineno, "its time is not an integer") from None
        if last is not None and t < last and src.name not in done.unordered:
            done.unordered.append(src.name)
        last = t
        done.side_ops += 1
        yield t, line[1:]


# Run directories ----------------------------------------------------------------------------
def side_files(run_dir: str | Path) -> list[Path]:
    """The run's side files: the slots' in slot order, then the final reads' (`final.jsonl`,
    written last); [] when it has none."""
    d = Path(run_dir) / JVM_SENDS_DIR
    if not d.is_dir():
        return []
    return sorted(
        d.glob(f"*{SIDE_SUFFIX}"),
        key=lambda p: (not p.name.startswith("slot"), len(p.name), p.name),
    )


def pending(run_dir: str | Path) -> bool:
    """Does the run have sends recorded in a JVM as JSONL side files that are not yet in its
    history? (A side directory left beside a merged history is not pending: the merge had only
    its clean-up left; nor is one of binary side files, which history/build.py builds.)"""
    if not side_files(run_dir):
        return False
    return JVM_SENDS_FIELD not in _header_of(Path(run_dir) / JSONL_NAME)


def _header_of(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            first = f.readline()
    except OSError:
        return {}
    if not first.endswith(b"\n"):
        return {}
    try:
        return read_header_line(str(path), first)
    except HistoryError:
        return {}


def merge_run(run_dir: str | Path, lock_wait_s: float = LOCK_WAIT_S) -> Merged | None:
    """Merges the run's side files into its history in place; None when there was nothing to
    merge. Waits up to `lock_wait_s` for a JVM still writing a side file; a file it still holds
    then is merged as far as it was written (its last line, if torn, dropped)."""
    run_dir = Path(run_dir)
    side_dir = run_dir / JVM_SENDS_DIR
    if not side_dir.is_dir():
        return None
    history = run_dir / JSONL_NAME
    if not pending(run_dir):
        if JVM_SENDS_FIELD in _header_of(history):
            shutil.rmtree(side_dir, ignore_errors=True)  # a merge cut short after its rename
        return None
    paths = side_files(run_dir)
    tmp = history.with_name(history.name + ".merging")
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(p.open("rb")) for p in paths]
        deadline = time.monotonic() + lock_wait_s
        for f in files:
            await_writer(f, deadline)
        main = stack.enter_context(history.open("rb"))
        srcs = [Source(p.name, f, _torn(f)) for p, f in zip(paths, files, strict=True)]
        out = stack.enter_context(tmp.open("wb", buffering=1 << 20))
        done = merge(Source(JSONL_NAME, main, _torn(main)), srcs, out.write)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, history)
    shutil.rmtree(side_dir, ignore_errors=True)
    return done


def await_writer(f: Any, deadline: float) -> None:
    """Waits for the file's writer (SideWriter.java holds an fcntl lock while it writes)."""
    while True:
        try:
            fcntl.lockf(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)


def _torn(f: Any) -> bool:
    """Does the open file end without a newline (its writer killed mid-line)?"""
    size = os.fstat(f.fileno()).st_size
    if size == 0:
        return False
    pos = f.tell()
    f.seek(size - 1)
    last = f.read(1)
    f.seek(pos)
    return last != b"\n"


def highest_process(path: str | Path) -> int | None:
    """The highest client process id a side file names (for a JVM that died before saying)."""
    best = None
    with Path(path).open("rb") as f:
        for line in f:
            m = _PROCESS.search(line)
            if m is not None:
                p = int(m.group(1))
                best = p if best is None else max(best, p)
    return best
