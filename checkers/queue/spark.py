"""The queue checks as one Spark job: shuffle elements by key once, run check_key per key.

Cross-key facts (which info ops happened, who reassigned partitions) are small and gathered
first with narrow filters, then shipped with the function, so there is exactly one shuffle.
"""

from __future__ import annotations

from typing import Any

from checkers.queue.check import QueueResult, merge
from checkers.queue.context import build_context
from checkers.queue.per_key import check_key, elems_from_frame
from checkers.queue.rows import ROW_SCHEMA, from_frame, to_frame
from history.columnar import ELEM_ROW, ELEMENT_COLUMNS


def run_spark(
    spark: Any, parquet: str, resets: list[tuple[str, int, str, list[int] | None]]
) -> QueueResult:
    from pyspark.sql import functions as F

    elems = spark.read.parquet(parquet).filter(F.col("row") == ELEM_ROW).select(*ELEMENT_COLUMNS)
    info = (
        elems.filter((F.col("kind") == "send") & (F.col("type") == "info"))
        .filter(F.col("value").isNotNull())
        .select("index", "value")
        .toPandas()
    )
    polled: list[int] = []
    if len(info):
        values = [int(v) for v in info["value"]]
        polled = [
            int(r.value)
            for r in elems.filter((F.col("kind") == "poll") & F.col("value").isin(values))
            .select("value")
            .distinct()
            .collect()
        ]
    ctx = build_context(
        zip(info["index"].astype(int), info["value"].astype(int), strict=True), polled, resets
    )

    def per_key(pdf: Any) -> Any:
        key = int(pdf["key"].iloc[0])
        return to_frame(key, check_key(key, elems_from_frame(pdf), ctx))

    out = elems.groupBy("key").applyInPandas(per_key, schema=ROW_SCHEMA).toPandas()
    return merge([from_frame(out)], ctx.subscribe)
