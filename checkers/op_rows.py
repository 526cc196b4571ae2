"""Op rows as the checkers read them (checkers/inputs.py `op_rows`: one dict per history line,
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
