"""Jepsen's Kafka workload history (`history.edn` of jepsen.tests.kafka) as a kchaos history.

Jepsen writes one operation map per line (or, in older stores, one vector of them). Both speak
the same model, so conversion is names and shapes: keywords become strings, the poll map's
integer keys become decimal strings (docs/history.md), and nemesis ops, which Jepsen records as
an `:info` pair, become an invoke and its `ok` completion, as kchaos's nemesis writes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import edn_format
from edn_format import Keyword

from history.errors import HistoryError
from history.format import FORMAT_VERSION, HEADER_KEY, JSONL_NAME, NEMESIS
from history.reader import History, parse_history


def _plain(x: Any) -> Any:
    """EDN data as JSON data: keywords and symbols by name, sets as sorted lists."""
    if isinstance(x, Keyword):
        return x.name
    if isinstance(x, edn_format.Symbol):
        return x.name
    if isinstance(x, str | bytes):
        return x
    # edn_format's ImmutableDict and ImmutableList are Mappings and Sequences, not dict/list.
    if isinstance(x, Mapping):
        return {str(_plain(k)): _plain(v) for k, v in x.items()}
    if isinstance(x, AbstractSet):
        return sorted((_plain(v) for v in x), key=repr)
    if isinstance(x, Sequence):
        return [_plain(v) for v in x]
    return x


def _ops(text: str, path: Path) -> list[Mapping[Any, Any]]:
    stripped = text.lstrip()
    if stripped.startswith(("[", "(")):
        whole = edn_format.loads(stripped)
        return list(whole)
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            op = edn_format.loads(line)
        except Exception as e:  # edn_format raises several unrelated types
            raise HistoryError(path, lineno, f"not EDN ({type(e).__name__}: {e})") from None
        if not isinstance(op, Mapping):
            raise HistoryError(path, lineno, f"expected an op map, found {type(op).__name__}")
        out.append(op)
    return out


def convert_ops(raw: list[Mapping[Any, Any]], path: str | Path = "<edn>") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    nemesis_open: set[str] = set()
    for n, r in enumerate(raw):
        op = _plain(r)
        for field in ("type", "f", "process", "time"):
            if field not in op:
                raise HistoryError(path, n + 1, f"Jepsen op has no :{field}")
        kind, f = op["type"], op["f"]
        if op["process"] == NEMESIS and kind == "info":
            # Jepsen's nemesis logs :info on both sides of each fault action.
            kind = "ok" if f in nemesis_open else "invoke"
            (nemesis_open.discard if kind == "ok" else nemesis_open.add)(f)
        converted = {
            "index": len(out),
            "type": kind,
            "f": f,
            "value": op.get("value"),
            "process": op["process"],
            "time": op["time"],
            "wall": None,
            "node": None,
        }
        if "error" in op:
            converted["error"] = (
                json.dumps(op["error"]) if not isinstance(op["error"], str) else op["error"]
            )
        out.append(converted)
    return out


def read_edn_history(path: str | Path) -> History:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryError(p, None, f"cannot read: {e}") from None
    ops = convert_ops(_ops(text, p), p)
    return parse_history(to_jsonl(ops, p), p)


def to_jsonl(ops: list[dict[str, Any]], source: str | Path) -> bytes:
    header = {HEADER_KEY: FORMAT_VERSION, "run": f"jepsen:{source}", "started_wall": None,
              "converted_from": str(source)}  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in [header, *ops]).encode()


def convert_edn_file(path: str | Path) -> Path:
    """Writes `history.jsonl` beside a Jepsen `history.edn` (again when the EDN is newer)."""
    p = Path(path)
    out = p.parent / JSONL_NAME
    if out.exists() and out.stat().st_mtime >= p.stat().st_mtime:
        return out
    history = read_edn_history(p)  # validated the way kchaos histories are, before writing
    out.write_bytes(to_jsonl(history.ops, p))
    return out
