"""Op rows as the checkers read them (checkers/core/inputs.py `op_rows`: one dict per history line,
the value as its JSON text)."""

from __future__ import annotations

import json
from typing import Any


def row_value(row: dict[str, Any]) -> Any:
    """The row's value; None when it has none or its JSON cannot be read (a truncated line
    judges nothing rather than stopping the check)."""
    try:
        return json.loads(row["value_json"]) if row.get("value_json") else None
    except ValueError:
        return None


def row_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The row's consumer-group and foreign-record fields (history.format.OP_FIELDS, carried in
    history.columnar.FIELDS_COLUMN); {} when it has none, its file predates the column, or its
    JSON cannot be read."""
    try:
        fields = json.loads(row["fields_json"]) if row.get("fields_json") else {}
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


def client_process(process: Any) -> int | None:
    """A client process's id (docs/history.md: client processes are ints, stored as their
    decimal text); None for the special processes and anything else."""
    p = str(process)
    return int(p) if p.isascii() and p.isdigit() else None
