"""Jepsen's names for queue keys and values, as a converted history's header records them.

A Jepsen history may name keys and values with keywords or strings (`[:send :x :a]`); the
columnar form holds them as int64, so history/edn.py numbers them (docs/history.md, "Jepsen
histories") and writes the numbering into the header. `Names` reads it back, so that what a
checker says of key 0 and value 3 can be said of `:x` and `:a`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from history.format import NAMES_FIELD

_N = r"-?\d+"
_LIST = rf"{_N}(?:, {_N})*(?: and {_N})?"
_NUMBER = re.compile(_N)


def _table(raw: Any, what: str) -> dict[int, str]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"names.{what} is {raw!r:.40}, expected an object of id -> name")
    out = {}
    for k, v in raw.items():
        try:
            i = int(k)
        except (TypeError, ValueError):
            raise ValueError(f"names.{what} has id {k!r:.40}, not an integer") from None
        if not isinstance(v, str):
            raise ValueError(f"names.{what}[{k}] is {v!r:.40}, expected the name as text")
        out[i] = v
    return out


@dataclass(frozen=True)
class Names:
    """Key and value ids -> their spelling in the Jepsen history (`:x`, `"a"`, `7`).

    Empty tables mean the history's own integers were kept: every id is its own name."""

    keys: Mapping[int, str] = field(default_factory=dict)
    values: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def from_header(cls, header: Mapping[str, Any]) -> Names:
        """The header's `names` ({"keys": {"0": ":x"}, "values": {...}}, each optional).
        Raises ValueError on a malformed one (history/reader.py makes that a HistoryError)."""
        raw = header.get(NAMES_FIELD)
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ValueError(f"names is {raw!r:.40}, expected an object")
        keys = _table(raw.get("keys", {}), "keys")
        values = _table(raw.get("values", {}), "values")
        return cls(keys, values)

    def to_header(self) -> dict[str, Any]:
        """The header field's value; only the tables that renamed anything."""
        out: dict[str, Any] = {}
        if self.keys:
            out["keys"] = {str(i): s for i, s in self.keys.items()}
        if self.values:
            out["values"] = {str(i): s for i, s in self.values.items()}
        return out

    def __bool__(self) -> bool:
        return bool(self.keys or self.values)

    def key(self, k: object) -> str:
        """A key as the Jepsen history spelled it (an id it never gave: as it stands)."""
        return _lookup(self.keys, k)

    def value(self, v: object) -> str:
        """A value as the Jepsen history spelled it (an id it never gave: as it stands)."""
        return _lookup(self.values, v)

    def rename(self, text: str) -> str:
        """A finding's explanation with key and value ids in their Jepsen spelling.

        Covers the phrases findings use (checkers/families/queue/rules/, checkers/families/cycles.py
        `_explain_step`, checkers/families/data_log): "key 3", "keys 1, 2", "keys [1, 2]",
        "value 7", "(value 7/9)", "values [7, 9]", "sent 7 to key", "sent 7, the next record",
        "the send of 7 (op", and the "e.g. 7 (op 4), 9 (op 5)" sample of unseen sends.
        Other numbers (ops, offsets, processes, times) are left alone."""
        if not self:
            return text

        def one(m: re.Match[str]) -> str:
            i = int(str(m.lastgroup)[1:])  # the rule's ids group, n<i>, closes last
            kind = _RULES[i][2]
            table = self.keys if kind == "key" else self.values
            swap = _SAMPLE_ID if kind == "sample" else _NUMBER
            return m[f"w{i}"] + swap.sub(lambda n: table.get(int(n[0]), n[0]), m[f"n{i}"])

        return _PHRASES.sub(one, text)


def _lookup(table: Mapping[int, str], x: object) -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return table.get(x, str(x))
    if isinstance(x, str) and _NUMBER.fullmatch(x):
        return table.get(int(x), x)  # poll maps key by decimal strings
    return str(x)


# (words, ids, table): every phrase in which a finding names a key or a value, matched in one
# pass so that no id is renamed twice (a name may itself be a number). An id ends where its
# number does: "key 1.5" is no finding's.
_END = r"(?![.]?\d)"
_RULES = (
    (r"\bkey ", rf"{_N}{_END}", "key"),
    (r"\bkeys \[?", rf"{_LIST}{_END}", "key"),
    (r"\bvalue ", rf"{_N}(?:/{_N})*{_END}", "value"),
    (r"\bvalues \[?", rf"{_LIST}{_END}", "value"),
    (r"\bsent |\bthe send of ", rf"{_N}(?= to key\b|, the next record| \(op )", "value"),
    (r"\be\.g\. ", rf"{_N} \(op \d+\)(?:, {_N} \(op \d+\))*", "sample"),
)
_PHRASES = re.compile("|".join(f"(?P<w{i}>{w})(?P<n{i}>{n})" for i, (w, n, _) in enumerate(_RULES)))
# In the unseen sample "7 (op 4), 9 (op 5)" the values are the numbers before "(op".
_SAMPLE_ID = re.compile(rf"{_N}(?= \(op )")
