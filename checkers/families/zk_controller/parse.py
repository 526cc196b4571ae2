"""Controller-epoch evidence in the logs of ZooKeeper-mode brokers (`logs/<node>/stdout.log`).

The wording is Kafka 3.x's (KafkaController, ReplicaManager, ZkMetadataCache, all at INFO or
WARN, which clusters/config.py keeps on): a controller's election ("Epoch incremented to E"),
its resignation, its own state-change lines (prefixed `[Controller id=X epoch=E]`), and each
broker's handling of controller requests (`[Broker id=B] ...`), accepted or refused as stale.

Only lines that start with a log4j timestamp count: a stack trace repeats the exception's
message (ControllerMovedException quotes the refusal) and must not count twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from checkers.scan.node_logs import LINE, node_log, wall_of

# KafkaServer.startup: the first line of every broker process (a restart starts a new one).
_START = re.compile(r"\] INFO (?:\[KafkaServer id=\d+\] )?starting \(kafka\.server\.KafkaServer\)")
_ELECTED = re.compile(
    r"\[Controller id=(\d+)\] \d+ successfully elected as the controller\. "
    r"Epoch incremented to (\d+) and epoch zk version is now (-?\d+)"
)
_RESIGNED = re.compile(r"\[Controller id=(\d+)\] Resigned \(kafka\.controller\.KafkaController\)")
_ACTS = re.compile(r"\[Controller id=(\d+) epoch=(\d+)\] ")
# A broker took the request's controller epoch as its own (ReplicaManager sets controllerEpoch
# before these lines, under replicaStateChangeLock, so file order is processing order).
_ACCEPTED = (
    re.compile(
        r"\[Broker id=(\d+)\] Stopped fetchers as part of LeaderAndIsr request correlationId \d+ "
        r"from controller (\d+) epoch (\d+) as part of the become-leader transition"
    ),
    re.compile(
        r"\[Broker id=(\d+)\] Stopped fetchers as part of become-follower request from "
        r"controller (\d+) epoch (\d+) with correlation id"
    ),
    re.compile(
        r"\[Broker id=(\d+)\] Add \d+ partitions and deleted \d+ partitions from metadata cache "
        r"in response to UpdateMetadata request sent by controller (\d+) epoch (\d+) "
    ),
    re.compile(
        r"\[Broker id=(\d+)\] Ignoring LeaderAndIsr request from controller (\d+) with "
        r"correlation id \d+ epoch (\d+) for partition \S+ since its associated leader epoch"
    ),
)
# Refused as stale: (broker, controller, the request's epoch, the broker's latest known epoch).
_REFUSED = (
    re.compile(
        r"\[Broker id=(\d+)\] Ignoring (?:LeaderAndIsr|StopReplica) request from controller (\d+) "
        r"with correlation id \d+ since its controller epoch (\d+) is old\. "
        r"Latest known controller epoch is (\d+)"
    ),
    re.compile(
        r"\[Broker id=(\d+)\] Received update metadata request with correlation id \d+ from an "
        r"old controller (\d+) with epoch (\d+)\. Latest known controller epoch is (\d+)"
    ),
)


@dataclass(frozen=True)
class Event:
    """One line that says something about controller epochs."""

    kind: str  # start, elected, resigned, acts, accepted, refused
    file: str  # as cited: logs/<node>/stdout.log
    line: int  # 1-based
    wall: float  # the node's log clock, Unix seconds
    text: str
    node_id: int | None = None  # the controller (elected, resigned, acts) or the broker
    controller: int | None = None  # accepted, refused: the request's sender
    epoch: int | None = None  # elected, acts, accepted, refused: the controller epoch
    known: int | None = None  # refused: the broker's latest known controller epoch

    def cite(self) -> str:
        return f"{self.file}:{self.line}"

    def at(self) -> str:
        return datetime.fromtimestamp(self.wall, UTC).strftime("%H:%M:%S.%f")[:-3]


def _event(file: str, n: int, wall: float, text: str) -> Event | None:
    if _START.search(text):
        return Event("start", file, n, wall, text)
    if m := _ELECTED.search(text):
        return Event("elected", file, n, wall, text, int(m[1]), epoch=int(m[2]))
    if m := _RESIGNED.search(text):
        return Event("resigned", file, n, wall, text, int(m[1]))
    if m := _ACTS.search(text):
        return Event("acts", file, n, wall, text, int(m[1]), epoch=int(m[2]))
    for pattern in _ACCEPTED:
        if m := pattern.search(text):
            return Event("accepted", file, n, wall, text, int(m[1]), int(m[2]), int(m[3]))
    for pattern in _REFUSED:
        if m := pattern.search(text):
            return Event("refused", file, n, wall, text, int(m[1]), int(m[2]), int(m[3]), int(m[4]))
    return None


def parse_log(text: str, file: str) -> list[Event]:
    """The controller-epoch events of one node's log, in file order."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        stamp = LINE.match(line)
        if stamp is None:
            continue
        event = _event(file, n, wall_of(stamp[1]), line)
        if event is not None:
            out.append(event)
    return out


def read_logs(run_dir: Path, nodes: list[str]) -> dict[str, list[Event]]:
    """Each named node's events, from `logs/<node>/stdout.log` where it exists."""
    out = {}
    for node in nodes:
        path, cited = node_log(run_dir, node)
        if path.is_file():
            out[node] = parse_log(path.read_text(errors="replace"), cited)
    return out
