"""A per-key result as flat rows, the shape a Spark job can return, and back."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from checkers.findings import Finding
from checkers.queue.per_key import Edge, KeyResult

# Findings and edges share one schema: `record` tells them apart.
ROW_SCHEMA = (
    "record string, kind string, key long, ops array<long>, explanation string, data string, "
    "unknown boolean"
)
COLUMNS = ["record", "kind", "key", "ops", "explanation", "data", "unknown"]


def to_frame(key: int, result: KeyResult) -> pd.DataFrame:
    rows: list[tuple[Any, ...]] = [
        ("finding", f.kind, key, list(f.ops), f.explanation, json.dumps(f.data), f.unknown)
        for f in result.findings
    ]
    rows += [
        ("edge", e.rel, key, [e.src, e.dst], "", json.dumps([e.value, e.value2]), False)
        for e in result.edges
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def from_frame(df: pd.DataFrame) -> KeyResult:
    out = KeyResult()
    for r in df.itertuples(index=False):
        ops = [int(x) for x in r.ops]
        if r.record == "finding":
            out.findings.append(
                Finding(
                    r.kind, int(r.key), tuple(ops), r.explanation, json.loads(r.data),
                    unknown=bool(r.unknown),
                )
            )  # fmt: skip
        else:
            v1, v2 = json.loads(r.data)
            out.edges.append(Edge(r.kind, ops[0], ops[1], int(r.key), v1, v2))
    return out
