"""Reading `history.jsonl`: every problem becomes one HistoryError naming the file and line."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history.errors import HistoryError
from history.format import (
    COMMIT_ERROR_FIELD,
    COMMIT_FIELD,
    COMPLETIONS,
    FOREIGN_FIELD,
    FORMAT_VERSION,
    HEADER_KEY,
    INT64_MAX,
    INT64_MIN,
    INVOCATIONS_ADDED,
    INVOKE,
    JSONL_NAME,
    JVM_SENDS_DIR,
    JVM_SENDS_FIELD,
    OP_FIELDS,
    OP_TYPES,
    PARQUET_NAME,
    REBALANCE_EVENTS,
    REBALANCE_FIELD,
    REQUIRED_FIELDS,
    TIME_FROM,
    TIME_FROM_INDEX,
    TIME_FROM_REASON,
    UNREADABLE_FIELD,
    is_int64,
)
from history.names import Names


@dataclass
class History:
    """A parsed history: the header, the operations in index order, and what the reader noticed."""

    path: str
    header: dict[str, Any]
    ops: list[dict[str, Any]]
    # A final line without its newline: the writer was killed mid-line; the op is dropped.
    torn_last_line: bool = False
    # Indices of invocations that never completed: checkers treat them as info.
    incomplete: list[int] = field(default_factory=list)
    # For each completion index, the index of its invocation.
    invoke_of: dict[int, int] = field(default_factory=dict)

    def notes(self) -> list[str]:
        return history_notes(
            self.path, len(self.ops), self.torn_last_line, self.incomplete, self.header
        )


def history_notes(
    path: str, ops: int, torn_last_line: bool, incomplete: list[int], header: dict[str, Any]
) -> list[str]:
    """What a reader noticed of a history of `ops` operations, one sentence each: a torn last
    line, invocations never completed (their indices, ascending), and what the header records
    of a conversion or a merge. The whole read and the streamed one (history/stream.py) say
    the same."""
    out = []
    if torn_last_line:
        out.append(
            f"{path}:{ops + 2}: last line is torn (no newline), ignored: "
            "the writer was killed mid-line"
        )
    if incomplete:
        out.append(
            f"{len(incomplete)} invocation(s) never completed; treated as info "
            f"(first: op {incomplete[0]})"
        )
    out.extend(_jepsen_notes(header))
    out.extend(_merge_notes(header))
    return out


def _merge_notes(header: dict[str, Any]) -> list[str]:
    """What merging the JVM-recorded sends dropped (history/merge.py), as the header says."""
    merged = header.get(JVM_SENDS_FIELD)
    if not isinstance(merged, dict):
        return []
    out = [
        f"{JVM_SENDS_DIR}/{name}: last line is torn (no newline), ignored: the JVM recording "
        "these ops (sends, or the final reads' polls) was killed mid-line; its earlier ops are "
        "merged"
        for name in merged.get("torn") or []
    ]
    if merged.get("history_torn"):
        out.append(
            f"{JSONL_NAME}: its last line was torn (no newline) when the JVM's sends were "
            "merged into it, and was left out: the writer was killed mid-line"
        )
    return out


def _jepsen_notes(header: dict[str, Any]) -> list[str]:
    """What converting a Jepsen history changed (history/edn.py), as its header records it."""
    source = header.get("converted_from", "the Jepsen history")
    out = []
    if header.get(TIME_FROM) == TIME_FROM_INDEX:
        out.append(
            f"{source}: op times are op positions (op N at N s), since "
            f"{header.get(TIME_FROM_REASON, 'its times could not be used')}: realtime order "
            "is history order, as in Elle"
        )
    if header.get(INVOCATIONS_ADDED):
        out.append(
            f"{source}: {header[INVOCATIONS_ADDED]} completion(s) had no invocation; each was "
            "given one just before it, at the history's earliest time, so that, as in Elle, "
            "no op precedes it in real time"
        )
    names = Names.from_header(header)
    if names:
        tables = [(what, t) for what, t in (("keys", names.keys), ("values", names.values)) if t]
        # "key ids: 0 = :x", not "keys 0 = :x", which Names.rename would take for key ids.
        shown = "; ".join(
            f"{what[:-1]} ids: " + ", ".join(f"{i} = {s}" for i, s in list(t.items())[:8])
            + (f" and {len(t) - 8} more" if len(t) > 8 else "")
            for what, t in tables
        )  # fmt: skip
        out.append(
            f"{source}: Jepsen's {' and '.join(w for w, _ in tables)} are numbered in order "
            f"of first appearance (the header's names): {shown}"
        )
    return out


def resolve_history_path(path: str | Path) -> Path:
    """A run directory or a history file; the directory's `history.jsonl` is what we read."""
    p = Path(path)
    if p.is_dir():
        p = p / JSONL_NAME
    if not p.exists():
        raise HistoryError(p, None, "no such history file")
    return p


def read_history(path: str | Path) -> History:
    """The history of a run directory or a history.jsonl; a run directory whose history is
    history.parquet alone (built from side files: history/build.py), its history.jsonl path,
    or a .parquet file, is read through the JSONL derived from it (history/export.py)."""
    p = Path(path)
    parquet = p / PARQUET_NAME if p.is_dir() and not (p / JSONL_NAME).exists() else p
    if p.name == JSONL_NAME and not p.exists():  # a run's, derived on demand
        parquet = p.with_name(PARQUET_NAME)
    if parquet.suffix == ".parquet" and parquet.exists():
        from history.export import jsonl_bytes  # pyarrow: only for this

        return parse_history(jsonl_bytes(parquet), parquet)
    p = resolve_history_path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise HistoryError(p, None, f"cannot read: {e.strerror or e}") from None
    return parse_history(data, p)


def parse_history(data: bytes, p: str | Path) -> History:
    """A history from the bytes of a `history.jsonl`; `p` names it in errors."""
    lines = data.split(b"\n")
    # split leaves "" after a final newline; anything else there is a torn write.
    torn = lines[-1] != b""
    lines = lines[:-1]
    if not lines:
        if torn:
            raise HistoryError(p, 1, "the header line is torn: the run died before writing it")
        raise HistoryError(p, None, "empty file: no header line")
    header = parse_header(p, lines[0])
    history = History(path=str(p), header=header, ops=[], torn_last_line=torn)
    pending: dict[Any, dict[str, Any]] = {}
    for lineno, raw in enumerate(lines[1:], start=2):
        op, opened = read_op(p, lineno, raw, len(history.ops), pending)
        if opened is not None:
            history.invoke_of[op["index"]] = opened["index"]
        history.ops.append(op)
    history.incomplete = sorted(op["index"] for op in pending.values())
    return history


def read_op(
    p: str | Path, lineno: int, raw: bytes, index: int, pending: dict[Any, dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(op, its invocation if it is a completion): line `lineno` (1-based; an op line, not the
    header), which must be op `index`, parsed, checked and paired: an invocation joins
    `pending` (process -> its invoke op), a completion takes its own out. The one check every
    reader of history.jsonl makes of a line (parse_history, history/stream.py)."""
    op = _parse_line(p, lineno, raw)
    _check_op(p, lineno, op, index)
    return op, _pair(p, lineno, op, pending)


def _parse_line(p: str | Path, lineno: int, raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except UnicodeDecodeError:
        raise HistoryError(p, lineno, "not UTF-8") from None
    except json.JSONDecodeError as e:
        raise HistoryError(p, lineno, f"not JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise HistoryError(p, lineno, "JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise HistoryError(p, lineno, f"expected a JSON object, found {type(obj).__name__}")
    return obj


def parse_header(p: str | Path, raw: bytes) -> dict[str, Any]:
    """The header line (line 1) parsed and checked: a format this reader knows, its names."""
    header = _parse_line(p, 1, raw)
    version = header.get(HEADER_KEY)
    if version is None:
        raise HistoryError(p, 1, f"first line is not a kchaos history header (no {HEADER_KEY!r})")
    if version != FORMAT_VERSION:
        raise HistoryError(
            p, 1, f"history format {version!r} is not one this reader knows ({FORMAT_VERSION})"
        )
    try:
        Names.from_header(header)
    except ValueError as e:
        raise HistoryError(p, 1, str(e)) from None
    return header


def _plain(op: dict[str, Any], expected_index: int) -> bool:
    """Does op pass every check of _check_op, in the common shape (no consumer-group or
    foreign-record field, a float or no wall)? A quick yes for most lines; a no sends the line
    through _check_op's full checks, which alone say what is wrong."""
    get = op.get
    process = get("process")
    kind = type(process)
    wall = get("wall")
    node = get("node")
    producer = get("producer")
    time = get("time")
    return (
        get("index") == expected_index
        and type(get("index")) is int
        and type(get("type")) is str
        and get("type") in OP_TYPES
        and type(get("f")) is str
        and ((kind is int and INT64_MIN <= process <= INT64_MAX) or kind is str)
        and type(time) is int
        and INT64_MIN <= time <= INT64_MAX
        and (wall is None or (type(wall) is float and math.isfinite(wall)))
        and (node is None or type(node) is str)
        and (producer is None or (type(producer) is int and INT64_MIN <= producer <= INT64_MAX))
        and all(get(name) is None for name in OP_FIELDS)
    )


def _check_op(p: str | Path, lineno: int, op: dict[str, Any], expected_index: int) -> None:
    if _plain(op, expected_index):
        return
    for name, types in REQUIRED_FIELDS.items():
        if name not in op:
            raise HistoryError(p, lineno, f"operation has no {name!r}")
        v = op[name]
        # bool is an int in Python; a JSON true is never an index, time or process.
        if (
            isinstance(v, bool)
            or not isinstance(v, types)
            or (isinstance(v, int) and not is_int64(v))
        ):
            wanted = " or ".join("64-bit int" if t is int else t.__name__ for t in types)
            raise HistoryError(p, lineno, f"{name!r} is {v!r:.40}, expected {wanted}")
    wall, node = op.get("wall"), op.get("node")
    # Huge integers and non-finite floats are not times, and Arrow cannot store them as float64.
    if wall is not None and (
        isinstance(wall, bool)
        or not isinstance(wall, int | float)
        or not math.isfinite(float(wall) if abs(wall) < 1e300 else math.inf)
    ):
        raise HistoryError(p, lineno, f"'wall' is {wall!r:.40}, expected Unix seconds")
    if node is not None and not isinstance(node, str):
        raise HistoryError(p, lineno, f"'node' is {node!r:.40}, expected a node name")
    producer = op.get("producer")
    if producer is not None and not is_int64(producer):
        raise HistoryError(p, lineno, f"'producer' is {producer!r:.40}, expected a 64-bit int")
    _check_group_fields(p, lineno, op)
    if op["index"] != expected_index:
        raise HistoryError(
            p, lineno, f"index {op['index']} out of order: expected {expected_index}"
        )
    if op["type"] not in OP_TYPES:
        raise HistoryError(p, lineno, f"type {op['type']!r} is not one of {sorted(OP_TYPES)}")


def _is_key(k: object) -> bool:
    """A queue key: an int64, or its decimal string (JSON object keys are strings)."""
    if isinstance(k, str):
        return k.isascii() and (k.isdigit() or (k[:1] == "-" and k[1:].isdigit()))
    return is_int64(k)


def _check_group_fields(p: str | Path, lineno: int, op: dict[str, Any]) -> None:
    """The consumer-group and foreign-record fields (docs/history.md), when present: their
    shapes are checked here so that the checkers that read them judge only what they say."""

    def bad(name: str, what: object, expected: str) -> HistoryError:
        return HistoryError(p, lineno, f"{name!r}: {what!r:.60} is not {expected}")

    rebalance = op.get(REBALANCE_FIELD)
    if rebalance is not None:
        if not isinstance(rebalance, list):
            raise bad(REBALANCE_FIELD, rebalance, "a list of [event, [keys], time]")
        for ev in rebalance:
            if (
                not isinstance(ev, list)
                or len(ev) != 3
                or ev[0] not in REBALANCE_EVENTS
                or not isinstance(ev[1], list)
                or not all(_is_key(k) for k in ev[1])
                or not is_int64(ev[2])
            ):
                raise bad(
                    REBALANCE_FIELD, ev, f"[event ({'|'.join(REBALANCE_EVENTS)}), [keys], time]"
                )
    commit = op.get(COMMIT_FIELD)
    if commit is not None and (
        not isinstance(commit, dict)
        or not all(_is_key(k) and is_int64(o) for k, o in commit.items())
    ):
        raise bad(COMMIT_FIELD, commit, '{"<key>": offset, ...}')
    error = op.get(COMMIT_ERROR_FIELD)
    if error is not None and not isinstance(error, str):
        raise bad(COMMIT_ERROR_FIELD, error, "a string")
    foreign = op.get(FOREIGN_FIELD)
    if foreign is not None:
        if not isinstance(foreign, list):
            raise bad(FOREIGN_FIELD, foreign, "a list of [topic, partition, offset, value]")
        for rec in foreign:
            if (
                not isinstance(rec, list)
                or len(rec) != 4
                or not isinstance(rec[0], str)
                or not is_int64(rec[1])
                or not (rec[2] is None or is_int64(rec[2]))
            ):
                raise bad(FOREIGN_FIELD, rec, "[topic, partition, offset, value]")
    unreadable = op.get(UNREADABLE_FIELD)
    if unreadable is not None:
        if not isinstance(unreadable, list):
            raise bad(UNREADABLE_FIELD, unreadable, "a list of [partition, offset, what]")
        for rec in unreadable:
            if (
                not isinstance(rec, list)
                or len(rec) != 3
                or not is_int64(rec[0])
                or not (rec[1] is None or is_int64(rec[1]))
                or not isinstance(rec[2], str)
            ):
                raise bad(UNREADABLE_FIELD, rec, "[partition, offset, what]")


def _pair(
    p: str | Path, lineno: int, op: dict[str, Any], pending: dict[Any, dict[str, Any]]
) -> dict[str, Any] | None:
    """Each process does one thing at a time: an invoke, then its one completion. Returns a
    completion's invocation."""
    proc = op["process"]
    if op["type"] == INVOKE:
        if proc in pending:
            raise HistoryError(
                p,
                lineno,
                f"process {proc!r} invokes again while op {pending[proc]['index']} is still open",
            )
        pending[proc] = op
        return None
    assert op["type"] in COMPLETIONS
    opened = pending.pop(proc, None)
    if opened is None:
        raise HistoryError(p, lineno, f"{op['type']} of process {proc!r} without an invocation")
    if opened["f"] != op["f"]:
        raise HistoryError(
            p, lineno, f"completion f {op['f']!r} does not match its invocation's {opened['f']!r}"
        )
    return opened
