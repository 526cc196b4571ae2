"""The queue checks as one Spark job: elements shuffled once by a hash bucket of the key, and
the vectorised checks (`vector.check_arrays`) run on each bucket, many keys at a time.

Cross-key facts (which info ops happened, who reassigned partitions) are small and gathered
first with narrow filters, then shipped with the function, so there is exactly one shuffle.
Buckets rather than keys keep the per-call cost (one Arrow batch in, one out) per bucket: a
history may have many small keys. Arrow all the way (`applyInArrow`, `toArrow`): no pandas,
whose nullable integers would go through float64 and lose precision past 2^53.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from checkers.queue.arrays import elem_arrays
from checkers.queue.check import QueueResult, finish
from checkers.queue.context import QueueContext, build_context
from checkers.queue.rows import ROW_DDL, ROW_SCHEMA, from_arrow, to_arrow
from checkers.queue.vector import check_arrays
from history.columnar import ELEM_ROW, ELEMENT_CHECK_COLUMNS
from history.format import UNDECLARED


def run_spark(
    spark: Any,
    parquet: str,
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> QueueResult:
    """`slots`, `after_abort`: QueueContext's (shipped to every bucket with the other cross-key
    facts)."""
    from pyspark.sql import functions as F

    elems = (
        spark.read.parquet(parquet).filter(F.col("row") == ELEM_ROW).select(*ELEMENT_CHECK_COLUMNS)
    )
    ctx = _context(elems, resets, slots, after_abort)
    buckets = int(spark.conf.get("spark.sql.shuffle.partitions"))

    def per_bucket(table: pa.Table) -> pa.Table:
        return check_bucket(table, ctx)

    out = (
        elems.withColumn("bucket", F.pmod(F.xxhash64("key"), F.lit(buckets)))
        .groupBy("bucket")
        .applyInArrow(per_bucket, schema=ROW_DDL)
        .toArrow()
    )
    findings, edges = from_arrow(out.cast(ROW_SCHEMA))
    return finish(findings, edges, ctx.subscribe)


def check_bucket(table: pa.Table, ctx: QueueContext) -> pa.Table:
    """Every finding and edge of the keys in one bucket (whole keys: a key is never split)."""
    findings, edges = check_arrays(elem_arrays(table), ctx)
    return to_arrow(findings, edges)


def _context(
    elems: Any,
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None,
    after_abort: str,
) -> QueueContext:
    from pyspark.sql import functions as F

    info = (
        elems.filter((F.col("kind") == "send") & (F.col("type") == "info"))
        .filter(F.col("value").isNotNull())
        .select("index", "key", "value")
        .toArrow()
    )
    sends = list(zip(*(info.column(c).to_pylist() for c in ("index", "key", "value")), strict=True))
    polled: list[tuple[int, int]] = []
    if sends:
        values = sorted({v for _, _, v in sends})
        polled = [
            (int(r.key), int(r.value))
            for r in elems.filter((F.col("kind") == "poll") & F.col("value").isin(values))
            .select("key", "value")
            .distinct()
            .collect()
        ]
    return build_context(sends, polled, resets, slots, after_abort)
