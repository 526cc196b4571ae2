"""Jepsen's Kafka workload history (`history.edn` of jepsen.tests.kafka) as a kchaos history.

Jepsen writes one operation map per line; its tests write histories as vectors of maps over
many lines, often leaving fields off. Both read here, as does any sequence of op maps. The
rules (docs/history.md, "Jepsen histories"), each for a shape Jepsen's own tests use:

- keywords become strings, the poll map's integer keys decimal strings;
- queue keys and values that are not all integers (`[:send :x :a]`) are numbered, keys and
  values apart, in order of first appearance; the header's `names` keeps the spelling;
- a completion without an invocation gets one, just before it, at the history's earliest time;
- a completion without `:process` runs on the process `nil`; an invocation without one is an
  error, since nothing could pair it with its completion;
- without `:time` on every op (or with times that do not rise in history order), every op's
  time is its position, and the header's `time_from` says so;
- nemesis ops, which Jepsen records as an `:info` pair, become an invoke and its `ok`
  completion, as kchaos's nemesis writes them.

Everything else that does not fit is one HistoryError naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import edn_format
from edn_format import Keyword

from history import strict_json
from history.errors import HistoryError
from history.format import (
    ASSIGN_FS,
    CONSUMER_AFTER_ABORT,
    FORMAT_VERSION,
    HEADER_KEY,
    INFO,
    INVOCATIONS_ADDED,
    INVOKE,
    JEPSEN,
    JSONL_NAME,
    NAMES_FIELD,
    NEMESIS,
    NIL_PROCESS,
    OK,
    OP_TYPES,
    QUEUE_FS,
    TIME_FROM,
    TIME_FROM_INDEX,
    TIME_FROM_REASON,
    is_int64,
)
from history.names import Names
from history.reader import History, parse_history

# Jepsen groups a history by :process (group-by :process), so the ops that have none are one
# group: one process, under format.py's NIL_PROCESS.
# Op positions as times, a second apart: then findings ("completed at 3.000 s") read as
# positions, where nanoseconds would all show as 0.000 s.
POSITION_NS = 1_000_000_000


@dataclass(frozen=True)
class _Where:
    """Where an op came from: its first line in the file (when known), its position."""

    path: str
    line: int | None
    pos: int

    def __str__(self) -> str:
        return f"line {self.line}" if self.line is not None else f"op {self.pos} of the history"

    def error(self, message: str) -> HistoryError:
        if self.line is None:
            return HistoryError(self.path, None, f"{self}: {message}")
        return HistoryError(self.path, self.line, message)


@dataclass(frozen=True)
class _Op:
    where: _Where
    type: str
    f: str
    process: int | str | None
    time: int | None
    value: Any
    error: str | None = None
    rebalance: Any = None
    added: bool = False  # an invocation this conversion supplied


@dataclass(frozen=True)
class Converted:
    """A Jepsen history in kchaos's shape: the header, the ops, and each op's EDN line."""

    header: dict[str, Any]
    ops: list[dict[str, Any]]
    origins: list[_Where]

    def jsonl(self) -> bytes:
        return "".join(strict_json.dumps(x) + "\n" for x in [self.header, *self.ops]).encode()


# --- reading: each op with the line it starts on ------------------------------------------

_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"', re.S)
_ATOM_REST = re.compile(r'[^\s,\[\](){}";]*')


def _atom_end(text: str, i: int) -> int:
    m = _ATOM_REST.match(text, i)
    return i if m is None else m.end()


class _Unbalanced(Exception):
    def __init__(self, line: int, char: str) -> None:
        self.line, self.char = line, char


def _spans(text: str, depth: int) -> list[tuple[int, int, int]] | None:
    """(start, end, line) of each EDN form nested `depth` collections deep (0: top level). None
    for a text this scanner cannot cut into forms (a #_ discard, ^metadata): then the whole
    is parsed at once, without lines."""
    spans: list[tuple[int, int, int]] = []
    level, line, i, n = 0, 1, 0, len(text)
    begin: tuple[int, int] | None = None  # (offset, line) of the form being read at `depth`

    def done(end: int) -> None:
        nonlocal begin
        if level == depth and begin is not None:
            spans.append((begin[0], end, begin[1]))
            begin = None

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c in " \t\r,":
            i += 1
            continue
        if c == ";":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in ")]}":
            level -= 1
            if level < 0:
                raise _Unbalanced(line, c)
            i += 1
            done(i)
            continue
        if level == depth and begin is None:
            begin = (i, line)
        if c in "([{":
            level += 1
            i += 1
        elif c == '"':
            m = _STRING_REST.match(text, i + 1)
            j = n if m is None else m.end()
            line += text.count("\n", i, j)
            i = j
            done(i)
        elif c == "#":
            nxt = text[i + 1 : i + 2]
            if nxt in ("_", "^"):
                return None
            if nxt == "{":
                level += 1
                i += 2
            elif nxt == "#":  # ##Inf, ##NaN: one atom
                i = _atom_end(text, i + 2)
                done(i)
            else:  # a tag: it and the form after it are one form
                i = _atom_end(text, i + 1)
        elif c == "^":
            return None
        elif c == "\\":  # a character: \a, \newline, \(
            i = _atom_end(text, min(i + 2, n))
            done(i)
        else:
            i = max(_atom_end(text, i), i + 1)
            done(i)
    if begin is not None:  # an unclosed form runs to the end; parsing it names its line
        spans.append((begin[0], n, begin[1]))
    return spans


def _read_ops(text: str, path: str) -> list[tuple[Any, _Where]]:
    """The op maps as read, each with its line: one per line as Jepsen writes them, or a
    vector (or any sequence) of them laid out however, as its tests write them."""
    try:
        spans = _spans(text, 0)
        if spans is not None and len(spans) == 1 and text[spans[0][0]] in "[(":
            spans = _spans(text, 1)
    except _Unbalanced as e:
        raise HistoryError(path, e.line, f"not EDN (unbalanced {e.char!r})") from None
    if spans is None:
        return _read_whole(text, path)
    out: list[tuple[Any, _Where]] = []
    for lo in range(0, len(spans), _BATCH):
        batch = spans[lo : lo + _BATCH]
        try:  # edn_format builds a lexer and a parser per call: one call for many ops
            forms = edn_format.loads_all(text[batch[0][0] : batch[-1][1]])
        except Exception:  # edn_format raises several unrelated types
            forms = []
        if len(forms) != len(batch):  # one at a time, to name the line that fails
            forms = [_read_one(text, path, span) for span in batch]
            if any(f is _MISJUDGED for f in forms):
                return _read_whole(text, path)
        out.extend((f, _Where(path, line, len(out) + i)) for i, (f, (_, _, line)) in
                   enumerate(zip(forms, batch, strict=True)))  # fmt: skip
    return out


_BATCH = 4096
_MISJUDGED = object()


def _read_one(text: str, path: str, span: tuple[int, int, int]) -> Any:
    start, end, line = span
    try:
        forms = edn_format.loads_all(text[start:end])
    except Exception as e:
        raise HistoryError(path, line, f"not EDN ({type(e).__name__}: {e})") from None
    # Not one form: the scanner cut where EDN does not; the text is read whole instead.
    return forms[0] if len(forms) == 1 else _MISJUDGED


def _read_whole(text: str, path: str) -> list[tuple[Any, _Where]]:
    try:
        forms = edn_format.loads_all(text)
    except Exception as e:
        raise HistoryError(path, None, f"not EDN ({type(e).__name__}: {e})") from None
    if len(forms) == 1 and _is_seq(forms[0]):
        forms = list(forms[0])
    return [(op, _Where(path, None, i)) for i, op in enumerate(forms)]


# --- one op's fields ----------------------------------------------------------------------


def _is_seq(x: Any) -> bool:
    # edn_format's ImmutableList is a Sequence, not a list; a list `(...)` reads as a tuple.
    return isinstance(x, Sequence) and not isinstance(x, str | bytes)


def _name(x: Any) -> str | None:
    if isinstance(x, Keyword | edn_format.Symbol):
        return x.name
    return x if isinstance(x, str) else None


def _spelling(x: Any) -> str:
    """As Jepsen prints it: `:x`, `"a"`, `7`."""
    if is_int64(x):  # the usual key or value, spelled without edn_format's printer
        return str(x)
    try:
        return edn_format.dumps(x)
    except Exception:  # edn_format cannot print every Python value it reads
        return repr(x)


def _show(x: Any) -> str:
    s = _spelling(x)
    return s if len(s) <= 60 else s[:57] + "..."


def _plain(x: Any) -> Any:
    """EDN data as JSON data: keywords and symbols by name, sets as sorted lists."""
    if isinstance(x, Keyword | edn_format.Symbol):
        return x.name
    if isinstance(x, str | bytes):
        return x
    if isinstance(x, Mapping):
        return {str(_plain(k)): _plain(v) for k, v in x.items()}
    if isinstance(x, AbstractSet):
        return sorted((_plain(v) for v in x), key=repr)
    if isinstance(x, Sequence):
        return [_plain(v) for v in x]
    return x


def _field(raw: Mapping[Any, Any], name: str) -> Any:
    # Jepsen's fields are keywords; a hand-written history may spell them as strings.
    v = raw.get(Keyword(name))
    return raw.get(name) if v is None else v


def _op(raw: Any, where: _Where) -> _Op:
    if not isinstance(raw, Mapping):
        raise where.error(f"expected an op map, found {_show(raw)}")
    t = _field(raw, "type")
    if t is None:
        # Jepsen's Kafka checker gives such an op no outcome: must-have-committed? wants :ok,
        # cycles! skips Elle when the first op has no :type, and the poll-skip pass (a `case`
        # on :type without a default) throws on one. Treating it as :ok would judge more than
        # Jepsen does.
        raise where.error(
            "op has no :type; Jepsen's Kafka checker does not take it as :ok either (its "
            "cycle search skips such histories, its poll-skip analysis throws on one): give "
            "it :invoke, :ok, :fail or :info"
        )
    kind = _name(t)
    if kind not in OP_TYPES:
        raise where.error(f":type {_show(t)} is not one of :invoke, :ok, :fail, :info")
    f = _field(raw, "f")
    if _name(f) is None:
        raise where.error("op has no :f" if f is None else f":f {_show(f)} is not a keyword")
    process = _field(raw, "process")
    if process is not None and not is_int64(process):
        if _name(process) is None:
            raise where.error(f":process {_show(process)} is not an integer or a keyword")
        process = _name(process)
    time = _field(raw, "time")
    if time is not None and not is_int64(time):
        raise where.error(f":time {_show(time)} is not an integer (nanoseconds)")
    if time == -1:  # jepsen.history's time for an op made without one
        time = None
    error = _field(raw, "error")
    if error is not None:
        error = _plain(error)
        error = error if isinstance(error, str) else strict_json.dumps(error)
    return _Op(
        where, kind, _name(f), process, time, _field(raw, "value"), error,
        _field(raw, "rebalance-log"),
    )  # fmt: skip


def _nemesis_pairs(ops: list[_Op]) -> list[_Op]:
    """Jepsen's nemesis logs :info on both sides of each fault action; kchaos's writes an
    invoke and its completion."""
    open_fs: set[str] = set()
    out = []
    for op in ops:
        if op.process == NEMESIS and op.type == INFO:
            kind = OK if op.f in open_fs else INVOKE
            (open_fs.discard if kind == OK else open_fs.add)(op.f)
            op = replace(op, type=kind)
        out.append(op)
    return out


# --- keys and values ----------------------------------------------------------------------


class _Numbering:
    """Ids for keys (or values): every one numbered in order of first appearance, used only
    if some is not an integer, so that an id never meets a real integer of the history."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.used = False

    def see(self, x: Any) -> Any:
        self.ids.setdefault(_spelling(x), len(self.ids))
        self.used = self.used or not is_int64(x)
        return x

    def __call__(self, x: Any) -> Any:
        return self.ids[_spelling(x)] if self.used else x

    def names(self) -> dict[int, str]:
        return {i: s for s, i in self.ids.items()} if self.used else {}


_Fn = Callable[[Any], Any]


def _queue_value(op: _Op, key: _Fn, value: _Fn) -> Any:
    mops = op.value
    if mops is None:
        # Jepsen reads a missing value as no micro-ops; a fail or info completion without
        # one repeats its invocation in kchaos's format.
        return None if op.type not in (INVOKE, OK) else []
    if not _is_seq(mops):
        raise op.where.error(f":{op.f} value {_show(mops)} is not a vector of micro-operations")
    return [_mop(op, m, key, value) for m in mops]


def _mop(op: _Op, m: Any, key: _Fn, value: _Fn) -> list[Any]:
    kind = _name(m[0]) if _is_seq(m) and m else None
    if kind == "send":
        if len(m) != 3:
            raise op.where.error(f"send micro-op {_show(m)} is not [:send key value]")
        k, v = key(m[1]), m[2]
        if _is_seq(v):  # as Jepsen reads it: a vector is [offset value]
            if not _offset_pair(v):
                raise op.where.error(f"send result {_show(v)} is not [offset value]")
            return ["send", k, [v[0], _value(v[1], value)]]
        return ["send", k, _value(v, value)]
    if kind == "poll":
        if len(m) == 1 or (len(m) == 2 and m[1] is None):
            return ["poll"]
        if len(m) != 2 or not isinstance(m[1], Mapping):
            raise op.where.error(
                f"poll micro-op {_show(m)} is not [:poll {{key [[offset value] ...]}}]"
            )
        polled: dict[str, list[Any]] = {}
        for k, pairs in m[1].items():
            if not _is_seq(pairs):
                raise op.where.error(f"poll of key {_show(k)} returned {_show(pairs)}")
            read = []
            for pair in pairs:
                if not _offset_pair(pair):
                    raise op.where.error(
                        f"poll of key {_show(k)} returned {_show(pair)}, not [offset value]"
                    )
                read.append([pair[0], _value(pair[1], value)])
            polled[str(key(k))] = read  # JSON object keys are strings (docs/history.md)
        return ["poll", polled]
    raise op.where.error(f"micro-op {_show(m)} is neither [:send key value] nor [:poll]")


def _offset_pair(x: Any) -> bool:
    return _is_seq(x) and len(x) == 2 and (x[0] is None or is_int64(x[0]))


def _value(v: Any, value: _Fn) -> Any:
    return None if v is None else value(v)  # nil: a value not known


def _keys(op: _Op, keys: Any, key: _Fn, what: str) -> list[Any]:
    if not _is_seq(keys) and not isinstance(keys, AbstractSet):
        raise op.where.error(f"{what} {_show(keys)} is not a vector of keys")
    return [key(k) for k in keys]


def _rebalance(op: _Op, key: _Fn) -> list[dict[str, Any]] | None:
    log = op.rebalance
    if log is None:
        return None
    if not _is_seq(log) or not all(isinstance(e, Mapping) for e in log):
        raise op.where.error(f":rebalance-log {_show(log)} is not a vector of {{:keys [...]}}")
    return [{"keys": _keys(op, _field(e, "keys") or [], key, "rebalance :keys")} for e in log]


def _renamed(op: _Op, key: _Fn, value: _Fn) -> _Op:
    if op.f in QUEUE_FS:
        v = _queue_value(op, key, value)
    elif op.f in ASSIGN_FS and op.value is not None:
        v = _keys(op, op.value, key, f":{op.f} value")
    else:
        v = _plain(op.value)
    return replace(op, value=v, rebalance=_rebalance(op, key))


def _numbered(ops: list[_Op]) -> tuple[list[_Op], Names]:
    keys, values = _Numbering(), _Numbering()
    for op in ops:  # first pass: which names there are, in order of first appearance
        _renamed(op, keys.see, values.see)
    out = [_renamed(op, keys, values) for op in ops]
    return out, Names(keys.names(), values.names())


# --- invocations, processes, times --------------------------------------------------------


def _arguments(op: _Op) -> Any:
    """What a completion's invocation asked for: sends without offsets, polls without
    results."""
    if op.f not in QUEUE_FS:
        return op.value
    if op.value is None:
        return []
    return [["send", m[1], m[2][1] if isinstance(m[2], list) else m[2]] if m[0] == "send"
            else ["poll"] for m in op.value]  # fmt: skip


def _paired(ops: list[_Op]) -> list[_Op]:
    """Each completion after its invocation; a completion that has none gets one."""
    out: list[_Op] = []
    running: dict[Any, _Op] = {}
    for op in ops:
        if op.type == INVOKE:
            if op.process is None:
                raise op.where.error(
                    "invocation without :process: nothing pairs it with its completion "
                    "(Jepsen pairs them by :process)"
                )
            if op.process in running:
                raise op.where.error(
                    f"process {op.process} invokes again while its op at "
                    f"{running[op.process].where} is still running"
                )
            running[op.process] = op
            out.append(op)
            continue
        if op.process is None:
            op = replace(op, process=NIL_PROCESS)
        elif op.process in running:
            inv = running.pop(op.process)
            if inv.f != op.f:
                raise op.where.error(
                    f":{op.type} :{op.f} of process {op.process} completes an invocation of "
                    f":{inv.f} ({inv.where})"
                )
            out.append(op)
            continue
        # Jepsen's analysis works on completions, and Elle's realtime order links an op to
        # the ops invoked after it completed, walking the history: an op with no invocation
        # is never linked to, so nothing precedes it. The invocation given here keeps that
        # (its time is set so that no op completes before it: _timed).
        out.append(replace(op, type=INVOKE, value=_arguments(op), error=None, rebalance=None,
                           added=True))  # fmt: skip
        out.append(op)
    return out


def _time_reason(ops: list[_Op]) -> str | None:
    """Why times must be positions, if they must: Elle's realtime order is history order, and
    :time can stand for it only if every op has one and they rise with it."""
    missing = [op for op in ops if op.time is None]
    if missing:
        return f"{len(missing)} of {len(ops)} ops have no :time (first: {missing[0].where})"
    for a, b in pairwise(ops):
        if b.time <= a.time:
            return f":time does not rise at {b.where} ({b.time} after {a.time})"
    return None


def _timed(ops: list[_Op], reason: str | None) -> list[int]:
    times = [i * POSITION_NS if reason is not None else op.time for i, op in enumerate(ops)]
    real = [t for t, op in zip(times, ops, strict=True) if not op.added]
    # The earliest time of all: then no op completed before an added invocation, so nothing
    # precedes its op in kchaos's realtime order (A completed before B was invoked) either.
    earliest = min(real, default=0)
    return [earliest if op.added else t for t, op in zip(times, ops, strict=True)]


def _convert_ops(raw: list[tuple[Any, _Where]], source: str) -> Converted:
    """Jepsen ops as read (`_read_ops`) in kchaos's shape, with the header that says how."""
    ops = _nemesis_pairs([_op(r, where) for r, where in raw])
    reason = _time_reason(ops)
    ops, names = _numbered(ops)
    ops = _paired(ops)
    times = _timed(ops, reason)
    header: dict[str, Any] = {
        HEADER_KEY: FORMAT_VERSION,
        "run": f"jepsen:{source}",
        "started_wall": None,
        "converted_from": source,
        # Jepsen's client rolls its consumer back after a failed or crashed op; its checker
        # never moves a position on :fail or :info (docs/checkers.md).
        CONSUMER_AFTER_ABORT: JEPSEN,
    }
    if names:
        header[NAMES_FIELD] = names.to_header()
    if reason is not None:
        header[TIME_FROM] = TIME_FROM_INDEX
        header[TIME_FROM_REASON] = reason
    added = sum(op.added for op in ops)
    if added:
        header[INVOCATIONS_ADDED] = added
    out = []
    for i, (op, t) in enumerate(zip(ops, times, strict=True)):
        rec = {"index": i, "type": op.type, "f": op.f, "value": op.value,
               "process": op.process, "time": t, "wall": None, "node": None}  # fmt: skip
        if op.error is not None:
            rec["error"] = op.error
        if op.rebalance is not None:
            rec["rebalance_log"] = op.rebalance
        out.append(rec)
    return Converted(header, out, [op.where for op in ops])


def convert_edn_text(text: str, path: str | Path = "<edn>") -> Converted:
    """The text of a Jepsen history as a kchaos history; `path` names it in errors."""
    return _convert_ops(_read_ops(text, str(path)), str(path))


def _convert(path: Path) -> tuple[Converted, History]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryError(path, None, f"cannot read: {e}") from None
    converted = convert_edn_text(text, path)
    try:
        return converted, parse_history(converted.jsonl(), path)
    except HistoryError as e:
        # The reader counts JSONL lines (the header is line 1); name the op's EDN line.
        if e.line is None or e.line < 2:
            raise
        raise converted.origins[e.line - 2].error(e.message) from None


def read_edn_history(path: str | Path) -> History:
    return _convert(Path(path))[1]


def convert_edn_file(path: str | Path) -> Path:
    """Writes `history.jsonl` beside a Jepsen `history.edn` (again when the EDN is newer)."""
    p = Path(path)
    out = p.parent / JSONL_NAME
    if out.exists() and out.stat().st_mtime >= p.stat().st_mtime:
        return out
    converted, _ = _convert(p)  # validated the way kchaos histories are, before writing
    out.write_bytes(converted.jsonl())
    return out
