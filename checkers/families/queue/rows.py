"""Findings and edges as flat rows of plain columns, the shape a Spark job returns, and back.

Edges travel as integer columns (there are millions); findings, which are few, carry their ops
and data as JSON text, so that no column is a nested type (Arrow's list conversion of mixed
empty and non-empty rows is what broke an earlier version).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from checkers.core.findings import Finding
from checkers.families.edges import EdgeArrays
from history import strict_json

FINDING, EDGE = "finding", "edge"
# Findings and edges share one schema: `record` tells them apart.
ROW_SCHEMA = pa.schema(
    [
        ("record", pa.string()),
        ("kind", pa.string()),
        ("key", pa.int64()),
        ("ops", pa.string()),
        ("explanation", pa.string()),
        ("data", pa.string()),
        ("unknown", pa.bool_()),
        ("rel", pa.int8()),
        ("src", pa.int64()),
        ("dst", pa.int64()),
        ("value", pa.int64()),
        ("value2", pa.int64()),
    ]
)
# Edges alone, in EdgeArrays' field order: what the Spark engine's blobs carry.
EDGE_SCHEMA = pa.schema(
    [
        ("rel", pa.int8()),
        ("src", pa.int64()),
        ("dst", pa.int64()),
        ("key", pa.int64()),
        ("value", pa.int64()),
        ("value2", pa.int64()),
    ]
)
ROW_DDL = (
    "record string, kind string, key long, ops string, explanation string, data string, "
    "unknown boolean, rel byte, src long, dst long, value long, value2 long"
)


def to_arrow(findings: list[Finding], edges: EdgeArrays) -> pa.Table:
    nf, ne = len(findings), len(edges)
    zeros = np.zeros(nf, dtype=np.int64)
    f_key = np.array([-1 if f.key is None else f.key for f in findings], dtype=np.int64)
    f_nokey = np.array([f.key is None for f in findings], dtype=bool)
    return pa.table(
        {
            "record": [FINDING] * nf + [EDGE] * ne,
            "kind": [f.kind for f in findings] + [None] * ne,
            "key": pa.array(
                np.concatenate([f_key, edges.key.astype(np.int64)]),
                mask=np.concatenate([f_nokey, np.zeros(ne, dtype=bool)]),
                type=pa.int64(),
            ),
            "ops": [strict_json.dumps(list(f.ops)) for f in findings] + [None] * ne,
            "explanation": [f.explanation for f in findings] + [None] * ne,
            "data": [strict_json.dumps(f.data) for f in findings] + [None] * ne,
            "unknown": [f.unknown for f in findings] + [False] * ne,
            "rel": np.concatenate([zeros.astype(np.int8), edges.rel.astype(np.int8)]),
            **{
                c: np.concatenate([zeros, getattr(edges, c)])
                for c in ("src", "dst", "value", "value2")
            },
        },
        schema=ROW_SCHEMA,
    )


def from_arrow(table: pa.Table) -> tuple[list[Finding], EdgeArrays]:
    is_edge = np.asarray(table.column("record").to_numpy(zero_copy_only=False) == EDGE)
    rows = table.filter(pa.array(~is_edge)).to_pylist()
    findings = [
        Finding(
            r["kind"], r["key"], tuple(json.loads(r["ops"])), r["explanation"],
            json.loads(r["data"]), unknown=bool(r["unknown"]),
        )
        for r in rows
    ]  # fmt: skip
    e = table.filter(pa.array(is_edge))

    def col(name: str, dtype: type) -> np.ndarray:
        return e.column(name).to_numpy().astype(dtype, copy=False)

    edges = EdgeArrays(
        col("rel", np.int8), *(col(c, np.int64) for c in ("src", "dst", "key", "value", "value2"))
    )
    return findings, edges
