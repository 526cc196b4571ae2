"""What Kafka did with a file a ``disk:corrupt`` step damaged: detected it, or served it.

Each ``start-disk`` of kind corrupt that damaged a file (history/disk_faults.py ``corrupted``)
is one damage per node, on the partitions of the run's topic whose file it was (a
partition's segment, index, checkpoint or snapshot) or on every partition (a file of the whole
log directory or of the metadata log).

- ``corruption-detected`` (information, never a failure): the step's stop recorded Kafka logging
  what it found (``kafka_said`` lines with a detection label: a CRC that failed, a segment
  truncated at a bad batch, a checkpoint it could not read, a log directory it took offline, a
  fatal error, an error naming the file), or a read after the damage failed with a CRC or
  corrupt-record error (the Java consumer checks CRCs; librdkafka when asked).
- ``corruption-served``: a read after the damage, of a partition it touched, returned what no
  send wrote: a queue finding of the kinds in SERVED_KINDS (a value no send wrote, a value at
  another offset than its send's, an offset holding two values, a value in two places, offsets
  out of order within one poll) with an op after the damage, which it replaces
  (``CheckerResult.replaces``: reported once, under the kind that says what Kafka promised), or
  a record in a poll's ``unreadable`` field; and a ``lost-write`` whose acknowledged offset such
  a read was handed damaged (the same record, changed), which it replaces too. Kafka promises a
  consumer that checks CRCs (``check.crcs``) that "no on-the-wire or on-disk corruption to the
  messages occurred"; the broker validates CRCs on produce and when it recovers a log, and
  does not check a batch it serves. So the finding fails a run whose reader checked CRCs
  (Kafka's Java client, ``check.crcs`` true by default), unless the values read were sent there
  and only their offsets differ (OFFSET_ONLY: a damaged base offset, which the CRC does not
  cover); and is tolerated when it was librdkafka (``check.crcs`` false by default, and kchaos
  leaves it so): Kafka promised that reader nothing.
- ``corruption-refused-start`` (information, never a failure): the node whose file was damaged,
  its JVM killed after it, could not start again: the harness found it dead after the heal and
  recorded a ``kept-down`` op naming this damage (docs/history.md, "Nodes kept down"). Kafka
  refusing a file it cannot read is detection, not an anomaly; the finding quotes the lines it
  logged (why it would not start) from that op and the step's stop.
- ``unreadable-record``: a record of the run's topic in an ``unreadable`` field that no damage
  explains (on a partition no corrupt step had touched yet): a failure, since no send of the
  run wrote such a value.

A damage neither detected nor served is said in a note: Kafka may never have read the file (a
checkpoint is read at a start; ``restart`` 0 leaves the node running), or read it and went on
(what it then did shows in the other checks: a lost write, a replica that diverged).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from checkers.core.findings import Finding, secs
from checkers.scan.op_rows import row_fields, row_value
from history.columnar import FIELDS_COLUMN
from history.disk_faults import (
    CORRUPT,
    CORRUPTED,
    DETECTION,
    DISK_FULL,
    KAFKA_SAID,
    START_DISK,
    STOP_DISK,
)
from history.format import INVOKE, KEPT_DOWN, UNREADABLE_FIELD

DISK_FS = (START_DISK, STOP_DISK, KEPT_DOWN)
READ_FS = ("poll", "txn")
# Queue kinds (checkers/families/queue/) that say a read returned what no send wrote there.
SERVED_KINDS = (
    "garbage-read",
    "inconsistent-offsets",
    "duplicate",
    "read-from-other-partition",
    "int-poll-skip",
    "int-nonmonotonic-poll",
)
# A read's error that says the client found a damaged batch (librdkafka: "failed CRC32C check",
# _BAD_MSG; Kafka's consumer: CorruptRecordException, "Record batch ... is invalid").
CLIENT_DETECTION = re.compile(r"CRC|[Cc]orrupt|_BAD_MSG|Bad message|InvalidRecord|is invalid")
# How many lines or records a finding quotes.
QUOTED = 6

SERVED_RULE = (
    "a consumer that checks CRCs (check.crcs) is never handed a record damaged on disk: Kafka's "
    'consumer config says the check "ensures no on-the-wire or on-disk corruption to the '
    'messages occurred"; a broker checks CRCs on produce and when it recovers a log, not when '
    "it serves a fetch"
)
DETECTED_RULE = (
    "information: Kafka noticed a file a disk corrupt step damaged (its log, or a reader's CRC "
    "check), which is what it is meant to do"
)
REFUSED_RULE = (
    "information: Kafka refused to start on a file a disk corrupt step damaged (the node stays "
    "down until a person repairs or removes the file) rather than serve what it could not "
    "read, which is detection, not an anomaly"
)
UNREADABLE_RULE = (
    "a read of the run's topic returns only values some send wrote: a record whose value is "
    "not one of the run's, where no disk corrupt step damaged the partition, is garbage"
)
UNCHECKED_CRCS = (
    "the reader was librdkafka, whose check.crcs defaults to false (kchaos leaves it so): Kafka "
    "promises to detect on-disk corruption only to a consumer that checks CRCs"
)
# Queue kinds whose reads may have returned values sent to that partition, only at other
# offsets (when no value-level finding names the same read): what a damaged base offset serves,
# a batch header field the CRC does not cover (it starts at the attributes).
OFFSET_ONLY = frozenset(
    {"duplicate", "inconsistent-offsets", "int-poll-skip", "int-nonmonotonic-poll"}
)
UNCOVERED_HEADER = (
    "the values read were sent to this partition and only their offsets differ, which a damaged "
    "base offset explains: a batch header field its CRC does not cover, so a consumer that "
    "checks CRCs is promised nothing about it"
)


@dataclass(frozen=True)
class Damage:
    """One node's damaged file, from one corrupt step's start."""

    invoke: int  # the start's invocation index: reads completed after it may see the damage
    op: int  # the start's completion
    time: int | None
    node: str
    what: dict[str, Any]  # the record's entry for the node (path, offset, before/after, ...)
    params: dict[str, Any]  # file_class, how, restart
    keys: frozenset[int] | None  # the run's partitions whose file it was; None: every one
    stop_op: int | None = None
    said: dict[str, Any] = field(default_factory=dict)  # the stop's kafka_said
    # The kept-down op that says the node could not start again, and its record of the node.
    kept_op: int | None = None
    kept: dict[str, Any] = field(default_factory=dict)

    def touches(self, key: int | None) -> bool:
        return self.keys is None or (key is not None and key in self.keys)

    def describe(self) -> str:
        w, p = self.what, self.params
        if p.get("how") == "flip" and "before" in w:
            how = f"bit flip at byte {w['offset']} ({w['before']} -> {w['after']})"
        elif p.get("how") == "flip":
            how = f"bit flip at byte {w.get('offset')} (mask {w.get('mask')}; answer lost)"
        elif p.get("how") == "truncate":
            how = f"truncation from {w.get('size_before')} to {w.get('size_after')} bytes"
        else:
            how = (
                f"rollback to its copy of {p.get('age_s')} s earlier ({w.get('size_before')} -> "
                f"{w.get('size_after')} bytes)"
            )
        restart = ", the JVM killed after it" if p.get("restart") else ""
        return (
            f"op {self.op} (disk corrupt at {secs(self.time)}: {how} of {w.get('path')} on "
            f"{self.node}{restart})"
        )


@dataclass
class Judged:
    findings: list[Finding]
    notes: list[str]
    stats: dict[str, int]
    # The queue findings a corruption-served finding stands for (CheckerResult.replaces).
    replaces: list[Finding] = field(default_factory=list)

    @property
    def checked(self) -> bool:
        return bool(self.stats.get("disk_damages") or self.stats.get("unreadable_records"))


def telling_reads(table: pa.Table) -> pa.Table:
    """The read rows ``judge`` looks at: those with op fields (``unreadable``) or an error."""
    keep = pc.is_valid(table.column("error"))
    if FIELDS_COLUMN in table.column_names:
        fields = pc.fill_null(pc.greater(pc.utf8_length(table.column(FIELDS_COLUMN)), 0), False)
        keep = pc.or_(keep, fields)
    return table.filter(keep)


def damages(rows: Iterable[dict[str, Any]], topic: str | None) -> list[Damage]:
    """Every node's damaged file, in history order, each with its step's stop (the first
    stop-disk of kind corrupt completed after it)."""
    out: list[Damage] = []
    invoked: int | None = None
    for r in rows:
        if r["f"] == START_DISK and r["type"] == INVOKE:
            invoked = int(r["index"])
            continue
        value = row_value(r)
        if r["f"] == KEPT_DOWN and r["type"] != INVOKE and isinstance(value, dict):
            _kept_down(out, int(r["index"]), value.get("nodes"))
            continue
        if r["type"] == INVOKE or not isinstance(value, dict) or value.get("kind") != CORRUPT:
            continue
        if r["f"] == STOP_DISK:
            for i, d in enumerate(out):
                if d.stop_op is None:
                    said = value.get(KAFKA_SAID)
                    out[i] = _with_stop(d, int(r["index"]), said if isinstance(said, dict) else {})
            continue
        corrupted = value.get(CORRUPTED)
        if not isinstance(corrupted, dict):
            continue
        params = {k: value.get(k) for k in ("file_class", "how", "restart", "age_s")}
        for node, what in sorted(corrupted.items()):
            if not isinstance(what, dict):
                continue
            keys = None
            if "partition" in what:
                same = what.get("topic") == topic
                keys = frozenset({int(what["partition"])}) if same else frozenset()
            at = invoked if invoked is not None else int(r["index"])
            out.append(Damage(at, int(r["index"]), r.get("time"), node, what, params, keys))
    return out


def _with_stop(d: Damage, stop_op: int, said: dict[str, Any]) -> Damage:
    return replace(d, stop_op=stop_op, said=said)


def _kept_down(found: list[Damage], op: int, nodes: Any) -> None:
    """A kept-down op's nodes, each on the last damage of that node that killed its JVM."""
    if not isinstance(nodes, dict):
        return
    for node, record in nodes.items():
        if not isinstance(record, dict) or record.get("kind") != CORRUPT:
            continue  # kept down by a lasting fault of another kind
        hit = [i for i, d in enumerate(found) if d.node == node and d.params.get("restart")]
        if hit:
            found[hit[-1]] = replace(found[hit[-1]], kept_op=op, kept=record)


def latest(
    found: list[Damage], key: int | None, before: int, any_key: bool = False
) -> Damage | None:
    """The last damage of ``key``'s files (``any_key``: of any file) invoked before op
    ``before``."""
    hit = [d for d in found if (any_key or d.touches(key)) and d.invoke < before]
    return hit[-1] if hit else None


def judge(
    disk_rows: Iterable[dict[str, Any]],
    queue_findings: Iterable[Finding],
    read_rows: Iterable[dict[str, Any]],
    topic: str | None,
    client: str | None,
) -> Judged:
    """Every corrupt step's damage against what the queue check found and what reads were
    handed; ``client`` is the history header's (``java``, or None for librdkafka)."""
    rows = list(disk_rows)
    found = damages(rows, topic)
    checked = client == "java"
    tolerated = None if checked else UNCHECKED_CRCS
    out: list[Finding] = []
    replaces: list[Finding] = []
    served: set[int] = set()  # damages (by position) something was served from
    queue_findings = list(queue_findings)
    # Reads handed a value no send wrote to that partition: not a shifted offset.
    wrong_values = {o for f in queue_findings if f.kind not in OFFSET_ONLY for o in f.ops}
    for f in queue_findings:
        if f.kind not in SERVED_KINDS or not f.ops:
            continue
        d = latest(found, f.key, max(f.ops))
        if d is None:
            continue
        served.add(found.index(d))
        after = tuple(o for o in f.ops if o > d.invoke)
        shifted = f.kind in OFFSET_ONLY and not wrong_values.intersection(after)
        why = UNCOVERED_HEADER if checked and shifted else tolerated
        out.append(_served(d, f, after, why))
        replaces.append(f)
    # (key, offset) -> the damage whose read there was handed what no send wrote.
    damaged_at: dict[tuple[int, int], Damage] = {}
    for f in queue_findings:
        d = latest(found, f.key, max(f.ops)) if f.kind == "garbage-read" and f.ops else None
        if d is not None and isinstance(f.data.get("offset"), int) and f.key is not None:
            damaged_at[(f.key, f.data["offset"])] = d
    client_errors: list[tuple[dict[str, Any], Damage]] = []
    n_unreadable = 0
    for r in read_rows:
        if r["type"] == INVOKE:
            continue
        index = int(r["index"])
        error = r.get("error")
        if isinstance(error, str) and CLIENT_DETECTION.search(error):
            # The error names no partition the history can read: the last damage before it.
            d = latest(found, None, index, any_key=True)
            if d is not None:
                client_errors.append((r, d))
        records = row_fields(r).get(UNREADABLE_FIELD)
        if not isinstance(records, list) or not records:
            continue
        n_unreadable += len(records)
        by_damage: dict[int | None, list[Any]] = {}
        for rec in records:
            key = rec[0] if isinstance(rec, list) and rec else None
            d = latest(found, key if isinstance(key, int) and key >= 0 else None, index)
            by_damage.setdefault(None if d is None else found.index(d), []).append(rec)
        for at, recs in by_damage.items():
            if at is None:
                out.append(_unreadable(r, recs))
            else:
                served.add(at)
                out.append(_served_unreadable(found[at], r, recs, tolerated))
                for rec in recs:
                    if isinstance(rec[0], int) and isinstance(rec[1], int):
                        damaged_at[(rec[0], rec[1])] = found[at]
    # A write whose record was read back damaged is lost the same way: the finding of the read
    # stands for the lost write too.
    lost_values: dict[int | None, set[Any]] = {}
    for f in queue_findings:
        offset = f.data.get("offset")
        d = damaged_at.get((f.key, offset)) if f.kind == "lost-write" else None  # type: ignore[arg-type]
        if d is not None:
            out.append(_lost_to_damage(d, f, tolerated))
            replaces.append(f)
            lost_values.setdefault(f.key, set()).add(f.data.get("value"))
    # The queue's `unseen` of a key whose every unseen value is such a lost write says the same.
    for f in queue_findings:
        values = f.data.get("values")
        if f.kind == "unseen" and values and set(values) <= lost_values.get(f.key, set()):
            replaces.append(f)
    notes = []
    detected = 0
    for i, d in enumerate(found):
        said = _detection_lines(d.said)
        errors = [r for r, dd in client_errors if dd is d]
        if d.kept_op is not None:
            detected += 1
            out.append(_refused(d, said))
        elif said or errors:
            detected += 1
            out.append(_detected(d, said, errors))
        elif i not in served:
            notes.append(_unnoticed(d))
    notes += _disk_full_notes(rows)
    stats = {"disk_damages": len(found), "disk_damages_detected": detected}
    stats["disk_nodes_kept_down"] = sum(1 for d in found if d.kept_op is not None)
    stats["unreadable_records"] = n_unreadable
    # A run without damages or unreadable records says nothing (results.json keeps its shape).
    kept = {k: v for k, v in stats.items() if v or (k == "disk_damages" and found)}
    return Judged(out, notes, kept, replaces)


def _served(d: Damage, f: Finding, after: tuple[int, ...], tolerated: str | None) -> Finding:
    return Finding(
        "corruption-served",
        f.key,
        (d.op, *after),
        f"after {d.describe()}, op {', '.join(map(str, after))} read key {f.key} and was "
        f"handed what no send wrote there ({f.kind}: {f.explanation}). Rule: {SERVED_RULE}",
        {"damage": d.op, "node": d.node, "file": d.what.get("path"), "reads": list(after),
         "queue_kind": f.kind, "queue_data": f.data, "rule": SERVED_RULE},
        tolerated=tolerated,
    )  # fmt: skip


def _lost_to_damage(d: Damage, f: Finding, tolerated: str | None) -> Finding:
    return Finding(
        "corruption-served",
        f.key,
        (d.op, *f.ops),
        f"after {d.describe()}, the record acknowledged at offset {f.data.get('offset')} of key "
        f"{f.key} (value {f.data.get('value')}) was read back as what no send wrote: its loss is "
        f"the damage ({f.kind}: {f.explanation}). Rule: {SERVED_RULE}",
        {"damage": d.op, "node": d.node, "file": d.what.get("path"), "queue_kind": f.kind,
         "queue_data": f.data, "rule": SERVED_RULE},
        tolerated=tolerated,
    )  # fmt: skip


def _quote(recs: list[Any]) -> str:
    head = "; ".join(
        f"partition {r[0]} offset {r[1]}: {r[2]}" for r in recs[:QUOTED] if len(r) == 3
    )
    return head + (f" (and {len(recs) - QUOTED} more)" if len(recs) > QUOTED else "")


def _served_unreadable(
    d: Damage, r: dict[str, Any], recs: list[Any], tolerated: str | None
) -> Finding:
    index = int(r["index"])
    key = recs[0][0] if recs and isinstance(recs[0], list) else None
    return Finding(
        "corruption-served",
        key if isinstance(key, int) and key >= 0 else None,
        (d.op, index),
        f"after {d.describe()}, op {index} ({r['f']}, process {r['process']}, {r['type']} at "
        f"{secs(r.get('time'))}) was handed {len(recs)} record(s) no send wrote: "
        f"{_quote(recs)}. Rule: {SERVED_RULE}",
        {"damage": d.op, "node": d.node, "file": d.what.get("path"), "reads": [index],
         "records": recs, "rule": SERVED_RULE},
        tolerated=tolerated,
    )  # fmt: skip


def _unreadable(r: dict[str, Any], recs: list[Any]) -> Finding:
    index = int(r["index"])
    key = recs[0][0] if recs and isinstance(recs[0], list) else None
    return Finding(
        "unreadable-record",
        key if isinstance(key, int) and key >= 0 else None,
        (index,),
        f"op {index} ({r['f']}, process {r['process']}, {r['type']} at {secs(r.get('time'))}) "
        f"was handed {len(recs)} record(s) of the run's topic that no send wrote, on partitions "
        f"no disk corrupt step had damaged: {_quote(recs)}. Rule: {UNREADABLE_RULE}",
        {"records": recs, "rule": UNREADABLE_RULE},
    )


def _detection_lines(said: dict[str, Any]) -> dict[str, list[str]]:
    """Per node, the lines of the stop's kafka_said that say Kafka noticed."""
    out: dict[str, list[str]] = {}
    for node, got in sorted(said.items()):
        lines = got.get("lines") if isinstance(got, dict) else None
        for entry in lines or []:
            if isinstance(entry, list) and len(entry) == 2 and DETECTION & set(entry[0] or ()):
                out.setdefault(node, []).append(str(entry[1]))
    return out


def _detected(d: Damage, said: dict[str, list[str]], errors: list[dict[str, Any]]) -> Finding:
    parts = [
        f"{node} logged {len(lines)} line(s): " + " | ".join(lines[:QUOTED])
        for node, lines in said.items()
    ]
    parts += [
        f"op {r['index']} ({r['f']}, process {r['process']}) failed with {r['error']!r}"
        for r in errors[:QUOTED]
    ]
    ops = (d.op, *((d.stop_op,) if said and d.stop_op is not None else ()))
    ops += tuple(int(r["index"]) for r in errors[:QUOTED])
    return Finding(
        "corruption-detected",
        min(d.keys) if d.keys else None,
        ops,
        f"Kafka noticed {d.describe()}: {'; '.join(parts)}. {DETECTED_RULE}",
        {"damage": d.op, "node": d.node, "file": d.what.get("path"), "kafka_said": said,
         "client_errors": [int(r["index"]) for r in errors], "rule": DETECTED_RULE},
        tolerated="Kafka detected the damage: information, not a failure",
    )  # fmt: skip


def _refused(d: Damage, said: dict[str, list[str]]) -> Finding:
    """The node could not start on the damaged file: Kafka's lines from the kept-down op (its
    output since the damage, the latest start's included) and the step's stop."""
    own = d.kept.get(KAFKA_SAID) or {}
    kept = _detection_lines({d.node: own})
    # Without a detection label, the error lines it logged say why as well as Kafka put it.
    logged = [str(e[1]) for e in own.get("lines") or [] if isinstance(e, list) and len(e) == 2]
    # Each restart logs the same refusal: quoted once.
    lines = list(dict.fromkeys(kept.get(d.node) or said.get(d.node) or logged))
    others = {n: got for n, got in said.items() if n != d.node}
    words = " | ".join(lines[:QUOTED]) if lines else "nothing matching a detection pattern"
    more = "".join(f"; {n} logged: " + " | ".join(got[:QUOTED]) for n, got in others.items())
    ops = (d.op, *((d.stop_op,) if d.stop_op is not None else ()), d.kept_op)
    return Finding(
        "corruption-refused-start",
        min(d.keys) if d.keys else None,
        tuple(o for o in ops if o is not None),
        f"after {d.describe()}, {d.node} could not start again (op {d.kept_op}: kept down "
        f"after the heal); Kafka said: {words}{more}. {REFUSED_RULE}",
        {"damage": d.op, "node": d.node, "file": d.what.get("path"), "kept_down": d.kept_op,
         "kafka_said": {d.node: lines, **others}, "rule": REFUSED_RULE},
        tolerated="Kafka refused to start on the damaged file: detection, not a failure",
    )  # fmt: skip


def _unnoticed(d: Damage) -> str:
    why = (
        "the node kept running (restart 0), and a file read only at a start was not read"
        if not d.params.get("restart")
        else "it started again without logging anything about it"
    )
    stop = f" (its stop, op {d.stop_op}, read the nodes' logs)" if d.stop_op is not None else ""
    return (
        f"disk: Kafka logged nothing about {d.describe()}{stop} and no read was handed damaged "
        f"data: {why}; what it did with the file shows in the other checks, if anywhere"
    )


def _disk_full_notes(rows: list[dict[str, Any]]) -> list[str]:
    """What Kafka did with each full disk, from its stop: the nodes that exited, the storage
    lines each logged."""
    notes = []
    for r in rows:
        value = row_value(r)
        if r["type"] == INVOKE or r["f"] != STOP_DISK or not isinstance(value, dict):
            continue
        if value.get("kind") != DISK_FULL:
            continue
        said = _detection_lines(value.get(KAFKA_SAID) or {})
        logged = "; ".join(f"{n}: {lines[0]}" for n, lines in said.items()) or "nothing about it"
        notes.append(
            f"disk: full disk ended by op {r['index']}: exited {value.get('exited') or 'none'}, "
            f"restarted {value.get('restarted') or 'none'}; Kafka logged {logged}"
        )
    return notes
