"""The Spark engine: elements shuffled once by a hash bucket of the key, and every rule's
vectorised form (`vector.check_arrays`) run on each bucket, many keys at a time.

Cross-key facts (which info ops happened, who reassigned partitions) are small and gathered
first with narrow filters (the engine's ElementFacts), then shipped with the function, so there
is exactly one shuffle. Buckets rather than keys keep the per-call cost (one Arrow batch in, one
out) per bucket: a history may have many small keys. Arrow all the way (`applyInArrow`,
`toArrow`): no pandas, whose nullable integers would go through float64 and lose precision
past 2^53.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from checkers.queue.arrays import elem_arrays
from checkers.queue.context import QueueContext
from checkers.queue.elem import Elem, elems_from_columns
from checkers.queue.result import QueueResult, finish
from checkers.queue.rows import ROW_DDL, ROW_SCHEMA, from_arrow, to_arrow
from checkers.queue.source import ElementSource
from checkers.queue.vector import check_arrays
from history.columnar import ELEM_ROW, ELEMENT_CHECK_COLUMNS


class SparkEngine:
    """engine.QueueEngine over the elements of a Parquet history, as a Spark DataFrame."""

    def __init__(self, source: ElementSource) -> None:
        from pyspark.sql import functions as F

        self.spark = source.spark
        if self.spark is None:
            raise ValueError("the Spark engine needs a SparkSession")
        self.elems = (
            self.spark.read.parquet(source.parquet_path())
            .filter(F.col("row") == ELEM_ROW)
            .select(*source.check_columns(ELEMENT_CHECK_COLUMNS))
        )

    def info_sends(self) -> list[tuple[int, int, int]]:
        from pyspark.sql import functions as F

        info = (
            self.elems.filter((F.col("kind") == "send") & (F.col("type") == "info"))
            .filter(F.col("value").isNotNull())
            .select("index", "key", "value")
            .toArrow()
        )
        cols = (info.column(c).to_pylist() for c in ("index", "key", "value"))
        return list(zip(*cols, strict=True))

    def polled_among(self, values: list[int]) -> Iterable[tuple[int, int]]:
        from pyspark.sql import functions as F

        polls = (
            self.elems.filter((F.col("kind") == "poll") & F.col("value").isin(values))
            .select("key", "value")
            .distinct()
            .collect()
        )
        return [(int(r.key), int(r.value)) for r in polls]

    def sends_among(self, values: list[int]) -> list[tuple[int, Elem]]:
        from pyspark.sql import functions as F

        sends = (
            self.elems.filter((F.col("kind") == "send") & F.col("value").isin(values))
            .toArrow()
            .to_pydict()
        )
        elems = elems_from_columns(sends)
        keys = {
            (i, s): k for i, s, k in zip(sends["index"], sends["seq"], sends["key"], strict=True)
        }
        return [(int(keys[e.index, e.seq]), e) for e in elems]

    def check(self, ctx: QueueContext) -> QueueResult:
        from pyspark.sql import functions as F

        buckets = int(self.spark.conf.get("spark.sql.shuffle.partitions"))

        def per_bucket(table: pa.Table) -> pa.Table:
            return check_bucket(table, ctx)

        out = (
            self.elems.withColumn("bucket", F.pmod(F.xxhash64("key"), F.lit(buckets)))
            .groupBy("bucket")
            .applyInArrow(per_bucket, schema=ROW_DDL)
            .toArrow()
        )
        findings, edges = from_arrow(out.cast(ROW_SCHEMA))
        return finish(findings, edges, ctx.subscribe)


def check_bucket(table: pa.Table, ctx: QueueContext) -> pa.Table:
    """Every finding and edge of the keys in one bucket (whole keys: a key is never split)."""
    findings, edges = check_arrays(elem_arrays(table, producers=ctx.producers), ctx)
    return to_arrow(findings, edges)
