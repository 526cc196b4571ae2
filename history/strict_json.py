"""Strict JSON for every file kchaos writes: ``allow_nan=False``, so no NaN or Infinity (which
are not JSON, and which other readers refuse) ever reaches a plan, a spec, a history or a
verdict.

Options are checked finite where they are declared (history/options.py), so a plan or a spec
never holds one. A number kchaos computes (a rate over no time, a mean of nothing) or reads
(a Jepsen history's ``##NaN``) may; such a value is written as null rather than failing the
write, which would cost the run its record. The common case pays nothing: the strict encoder
runs first, and only a value it refuses is copied with its non-finite numbers as null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any


def _non_finite(exc: ValueError) -> bool:
    # json's own words for a NaN or an infinity under allow_nan=False (not a circular value).
    return str(exc).startswith("Out of range float values")


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth of dicts, lists and tuples) None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def encoder(**options: Any) -> Callable[[Any], str]:
    """An ``encode`` like ``json.JSONEncoder(**options).encode``, strict (one encoder, built once:
    for the per-op writers)."""
    strict = json.JSONEncoder(allow_nan=False, **options).encode

    def encode(value: Any) -> str:
        try:
            return strict(value)
        except ValueError as exc:
            if not _non_finite(exc):
                raise
            return strict(finite(value))

    return encode


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)``, strict: non-finite numbers are written as null."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if not _non_finite(exc):
            raise
        return json.dumps(finite(value), allow_nan=False, **options)
