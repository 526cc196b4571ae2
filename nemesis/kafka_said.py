"""What Kafka logged about a disk fault: the lines of each node's own output since a mark that
say it found a corruption or lost a log directory, recorded in the fault's stop so that the
checkers read them from the history alone (docs/disk.md, "What Kafka said").

A mark is the number of lines a node's output had when the fault began (``Logs.logs``: a
container's output keeps every start's lines, so a mark stays good across a restart). The scan
keeps each line that matches a pattern, with the pattern's label; lines that begin with
whitespace (the broker's configuration dump, stack frames) are skipped, an exception's own line
is not.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

from clusters.capabilities import Logs, Process
from clusters.errors import ClusterError
from history.disk_faults import (
    CHECKPOINT,
    CORRUPT_RECORD,
    DAMAGED,
    ERROR,
    FATAL,
    INVALID_MESSAGES,
    NAMES_FILE,
    STORAGE,
    STRAY,
)

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        CORRUPT_RECORD,
        re.compile(r"CorruptRecordException|Record is corrupt|InvalidRecordException|CRC"),
    ),
    (INVALID_MESSAGES, re.compile(r"Found invalid messages")),
    (DAMAGED, re.compile(r"[Cc]orrupt(ed|ion)?\b|CorruptSnapshotException")),
    (
        CHECKPOINT,
        re.compile(
            r"[Cc]heckpoint file|Malformed line|checkpoint.*(version|[Ee]xpected)|"
            r"Failed to read .*(checkpoint|metadata)"
        ),
    ),
    (
        STORAGE,
        re.compile(
            r"KafkaStorageException|Stopping serving logs in dir|No space left on device|"
            r"log dirs? .*(have|has) failed|LogDirFailureChannel|offline log dir"
        ),
    ),
    # 4.x: "Log in /var/lib/kafka/data/kchaos-queue-0 marked stray and renamed to ...-stray".
    (STRAY, re.compile(r"marked stray|[Ss]tray (log|replica|partition)")),
    (
        FATAL,
        re.compile(
            r"\] FATAL |Exiting Kafka|[Ff]atal (error|fault)|Shutdown broker because|halt(ing)? |"
            r"due to fatal"
        ),
    ),
)
_LEVEL = re.compile(r"^\[[^\]]*\] (WARN|ERROR|FATAL) ")
_EXCEPTION = re.compile(r"^(Caused by: )?[\w.$]+(Exception|Error)\b")
# A Kafka node that finished starting (KRaft: KafkaRaftServer; ZooKeeper mode: KafkaServer).
STARTED = re.compile(r"Kafka Server started|\[KafkaServer id=\d+\] started")
# What the record keeps of one node: its first lines, each cut to a width.
MAX_LINES, MAX_WIDTH = 40, 400


def marks(nodes: Iterable[Any]) -> dict[str, int]:
    """How many lines each node's output has now (nodes that cannot say are left out)."""
    out = {}
    for node in nodes:
        if not isinstance(node, Logs):
            continue
        try:
            out[node.name] = len(node.logs().splitlines())
        except ClusterError:
            continue  # a node that is gone has said nothing since
    return out


def labels(line: str, names: tuple[str, ...] = ()) -> list[str]:
    """The labels of a line: each pattern it matches; NAMES_FILE when a warning, error or
    exception line names one of ``names``; ERROR for an error line that matches nothing."""
    if not line or line[0].isspace():
        return []
    found = [label for label, pattern in PATTERNS if pattern.search(line)]
    level = _LEVEL.match(line)
    loud = level is not None or _EXCEPTION.match(line) is not None
    if loud and any(n in line for n in names):
        found.append(NAMES_FILE)
    if not found and level is not None and level[1] in ("ERROR", "FATAL"):
        found.append(ERROR)
    return found


def scan(text: str, names: tuple[str, ...] = ()) -> dict[str, Any]:
    """The lines of ``text`` with labels: ``lines`` ([[labels, line], ...], the first
    MAX_LINES) and ``count`` (all of them), and ``labels`` (every label seen, sorted). An
    exception's line right after a kept line is kept too (as ERROR if it matches nothing): it
    says why ("KafkaException: The leader requested truncation to offset 16, ...")."""
    kept: list[list[Any]] = []
    seen: set[str] = set()
    count = 0
    after_kept = False
    for line in text.splitlines():
        if line[:1].isspace():
            continue  # a stack frame or the configuration dump: the kept line's context holds
        got = labels(line, names)
        if not got and after_kept and _EXCEPTION.match(line):
            got = [ERROR]
        after_kept = bool(got)
        if not got:
            continue
        count += 1
        seen.update(got)
        if len(kept) < MAX_LINES:
            kept.append([got, line[:MAX_WIDTH]])
    return {"lines": kept, "count": count, "labels": sorted(seen)}


def since(node: Logs, mark: int) -> str:
    """The node's output after its first ``mark`` lines."""
    return "\n".join(node.logs().splitlines()[mark:])


def said(
    nodes: Iterable[Any], from_marks: dict[str, int], names: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Per node, what ``scan`` keeps of its output since its mark (nodes with nothing to say,
    or none to ask, are left out). A node with no mark is read whole, and says so."""
    out: dict[str, Any] = {}
    for node in nodes:
        if not isinstance(node, Logs):
            continue
        try:
            text = since(node, from_marks.get(node.name, 0))
        except ClusterError as exc:
            out[node.name] = {"error": str(exc)}
            continue
        got = scan(text, names)
        if node.name not in from_marks:
            got["whole_log"] = True
        if got["count"]:
            out[node.name] = got
    return out


def wait_started(
    nodes: Iterable[Any], from_marks: dict[str, int], timeout: float = 60
) -> dict[str, str]:
    """Waits until each node's output since its mark says Kafka started, or its process has
    exited again, or ``timeout`` passes: what a corrupted file does to a start shows in the
    log by then. Per node: "started", "exited" or "timed out"."""
    pending = [n for n in nodes if isinstance(n, Logs) and isinstance(n, Process)]
    out: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while pending:
        for node in list(pending):
            try:
                text = since(node, from_marks.get(node.name, 0))
                running = node.is_running()
            except ClusterError:
                text, running = "", False
            if STARTED.search(text):
                out[node.name] = "started"
            elif not running:
                out[node.name] = "exited"
            else:
                continue
            pending.remove(node)
        if pending and time.monotonic() > deadline:
            out.update({n.name: "timed out" for n in pending})
            break
        if pending:
            time.sleep(0.5)
    return out
