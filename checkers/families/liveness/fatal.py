"""`fatal-log-line`: a node logged a fatal error (log4j level FATAL, or an ERROR line that says
"fatal": Kafka's ProcessTerminatingFaultHandler "Encountered fatal fault", "Fatal error during
broker startup", "Exiting Kafka due to fatal exception") that no fault of the run explains. The
finding quotes the line, its file and line number, and the exception lines under it.

The allow-list (ALLOWED): what faults legitimately cause, each entry a pattern over the line
and the exception lines under it, allowed only on a node some fault had touched (its outer span
began, checkers/scan/fault_windows.py) by the line's time, or within the seconds after another
allowed fatal line of the same node (the same JVM going down). The nodes' logs are stamped in
UTC by the nodes' clocks, the harness's ops by the same host's: a clock fault's skew is
covered, since any fault on the node makes its lines eligible from the fault's start on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from checkers.core.findings import Finding
from checkers.scan.fault_windows import Faults
from checkers.scan.node_logs import LINE, node_log, wall_of

FATAL_RULE = (
    "a Kafka node does not stop on a fatal error unless something outside it made it stop: a "
    "damaged or full disk, or its own start interrupted by a fault (the allow-list, "
    "docs/checkers.md, Liveness); any other fatal error is a node lost to the cluster"
)
_FATAL = re.compile(r"fatal", re.IGNORECASE)
# Lines under a log line that belong to it (its exception), read for the allow-list and quoted.
CAUSE_LINES = 6
# After an allowed fatal line, further fatal lines of the same node within this long are its
# consequences (the JVM exiting, the broker's startup cancelled).
FOLLOWS_S = 30.0


@dataclass(frozen=True)
class Allowed:
    name: str
    pattern: re.Pattern[str]
    why: str


ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        "storage",
        re.compile(
            r"CorruptRecordException|InvalidRecordException|KafkaStorageException|"
            r"UncheckedIOException|IOException|No space left on device|Read-only file system|"
            r"node ID not found|meta\.properties|quorum-state|checksum|[Cc]orrupt",
        ),
        "a node whose files a fault damaged, filled or cut short (a disk corruption, a power "
        "loss, a full disk) stops on the storage error rather than serve them",
    ),
    Allowed(
        "startup-interrupted",
        re.compile(
            r"CancellationException|TimeoutException|waiting for the controller to acknowledge|"
            r"Fatal error during (broker|controller|KafkaServer) startup|during startup",
        ),
        "a node restarted by a fault's stop or the heal whose start was interrupted (its own "
        "controller stopped, the quorum out of reach) exits instead of serving half started",
    ),
)


@dataclass(frozen=True)
class FatalLine:
    node: str
    file: str
    line: int
    wall: float
    text: str
    cause: tuple[str, ...]

    def cite(self) -> str:
        return f"{self.file}:{self.line}"


def fatal_lines(run_dir: str | Path, nodes: list[str]) -> list[FatalLine]:
    """The fatal lines of `logs/<node>/stdout.log` of each node that has one."""
    out = []
    for node in sorted(nodes):
        path, cited = node_log(run_dir, node)
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for i, line in enumerate(lines):
            m = LINE.match(line)
            if m is None or not (m[2] == "FATAL" or (m[2] == "ERROR" and _FATAL.search(m[3]))):
                continue
            cause = []
            for nxt in lines[i + 1 : i + 1 + CAUSE_LINES]:
                if LINE.match(nxt):
                    break
                cause.append(nxt.strip())
            out.append(FatalLine(node, cited, i + 1, wall_of(m[1]), line, tuple(cause)))
    return out


def _touched(faults: Faults, node: str, wall: float) -> str | None:
    for span in faults.spans:
        if span.outer[0] <= wall and (span.nodes is None or node in span.nodes):
            return span.says()
    for op, named in faults.others:
        if op.start <= wall and (named is None or node in named):
            return f"{op.process} op {op.cite()}"
    return None


def fatal_findings(lines: list[FatalLine], faults: Faults) -> tuple[list[Finding], list[str]]:
    """Findings for the fatal lines no allow-list entry explains, and a note per allowed kind."""
    found: list[Finding] = []
    allowed: dict[str, int] = {}
    last_allowed: dict[str, float] = {}
    for fl in lines:
        text = "\n".join((fl.text, *fl.cause))
        fault = _touched(faults, fl.node, fl.wall)
        entry = next((a for a in ALLOWED if a.pattern.search(text)), None)
        follows = fl.node in last_allowed and fl.wall - last_allowed[fl.node] <= FOLLOWS_S
        if fault is not None and (entry is not None or follows):
            name = entry.name if entry is not None else "follows an allowed line"
            allowed[name] = allowed.get(name, 0) + 1
            last_allowed[fl.node] = fl.wall
            continue
        why = (
            "no fault had touched the node by then"
            if fault is None
            else f"after {fault}, but no allow-list entry matches it"
        )
        quoted = fl.text + "".join(f" | {c}" for c in fl.cause[:3])
        found.append(
            Finding(
                "fatal-log-line",
                None,
                (),
                f"{fl.node} logged a fatal error at {fl.cite()}: {quoted!r}; {why}. "
                f"Rule: {FATAL_RULE}",
                {"rule": FATAL_RULE, "node": fl.node, "line": fl.cite(), "text": fl.text},
            )
        )
    notes = [
        f"liveness: {n} fatal log line(s) allowed as {name} (after a fault on their node)"
        for name, n in sorted(allowed.items())
    ]
    return found, notes
