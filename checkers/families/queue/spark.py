"""The Spark engine: elements shuffled once by a hash bucket of the key, and every rule's
vectorised form (`vector.check_arrays`) run on each bucket, many keys at a time.

Cross-key facts (which info ops happened, who reassigned partitions) are small and gathered
first with narrow filters (the engine's ElementFacts), then shipped with the function, so there
is exactly one shuffle. Buckets rather than keys keep the per-call cost (one Arrow batch in, one
out) per bucket: a history may have many small keys. Arrow all the way, no pandas, whose
nullable integers would go through float64 and lose precision past 2^53.

What crosses between the JVM and Python is what costs: at 10M ops, handing 13M element rows
from Spark's Parquet reader to Python workers took 9-12 s on 2 cores (each value written into
an Arrow vector row by row), and 13M edge rows coming back as many again, while the checks
themselves took 7 s. So when the workers can open the history themselves (any filesystem
pyarrow knows: a local path, s3://, gs://, hdfs://), each row group is read by pyarrow in a
task of its own and split by bucket into Arrow IPC blobs; Spark shuffles the blobs (a few
hundred rows) by bucket, each bucket's blobs are checked together, and its findings and edges
come back as blobs too (`_check_blobs`). Spark still schedules, shuffles and retries every
task. A history only the JVM can read (a scheme pyarrow lacks, e.g. s3a://) goes the row way
(`_check_rows`), same findings.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from checkers.core.findings import Finding
from checkers.core.memory import worker_memory
from checkers.families.edges import EdgeArrays
from checkers.families.queue.arrays import elem_arrays
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import Elem, elems_from_columns
from checkers.families.queue.result import QueueResult, finish
from checkers.families.queue.rows import EDGE_SCHEMA, ROW_DDL, ROW_SCHEMA, from_arrow, to_arrow
from checkers.families.queue.source import ElementSource
from checkers.families.queue.vector import check_arrays
from history.columnar import (
    ELEM_ROW,
    ELEMENT_CHECK_COLUMNS,
    element_row_groups,
    read_element_row_group,
)

# Elements per bucket the blob path aims at: a worker holds one bucket (Arrow, then the
# check's arrays) at a time, about 0.3 GB at this size.
BUCKET_ELEMENTS = 1_000_000
# Edges per returned blob: 40 MB, well inside Arrow's 2 GiB per column of a batch.
EDGES_PER_BLOB = 1_000_000
BLOB_DDL = "bucket int, rg int, blob binary"
RESULT_DDL = "bucket int, part int, findings binary, edges binary"


class SparkEngine:
    """engine.QueueEngine over the elements of a Parquet history, as a Spark DataFrame."""

    def __init__(self, source: ElementSource) -> None:
        self.spark = source.spark
        if self.spark is None:
            raise ValueError("the Spark engine needs a SparkSession")
        self.path = source.parquet_path()
        self.columns = source.check_columns(ELEMENT_CHECK_COLUMNS)
        self.file = _pyarrow_file(self.path)

    @functools.cached_property
    def elems(self) -> Any:
        """The element rows as Spark's reader gives them: the row way, for what pyarrow cannot
        open (reading the schema alone cost 1.7 s of a cold check, so only then)."""
        from pyspark.sql import functions as F

        return (
            self.spark.read.parquet(self.path)
            .filter(F.col("row") == ELEM_ROW)
            .select(*self.columns)
        )

    @functools.cached_property
    def footer(self) -> tuple[list[int], pa.Schema, int]:
        """From the history's footer, read once: the row groups that may hold elements, the
        stored schema, and how many rows those row groups hold."""
        with _open_file(self.file) as f:
            parquet = pq.ParquetFile(f)
            groups = element_row_groups(f)
            rows = sum(parquet.metadata.row_group(i).num_rows for i in groups)
            return groups, parquet.schema_arrow, rows

    def info_sends(self) -> list[tuple[int, int, int]]:
        if self.file is None:
            from pyspark.sql import functions as F

            info = (
                self.elems.filter((F.col("kind") == "send") & (F.col("type") == "info"))
                .filter(F.col("value").isNotNull())
                .select("index", "key", "value")
                .toArrow()
            )
        else:
            info = self._pick(["index", "key", "value"], _info_sends)
        cols = (info.column(c).to_pylist() for c in ("index", "key", "value"))
        return list(zip(*cols, strict=True))

    def polled_among(self, values: list[int]) -> Iterable[tuple[int, int]]:
        if self.file is None:
            from pyspark.sql import functions as F

            polls = (
                self.elems.filter((F.col("kind") == "poll") & F.col("value").isin(values))
                .select("key", "value")
                .toArrow()
            )
        else:
            polls = self._pick(["key", "value"], _among("poll", values))
        pairs = zip(polls.column("key").to_pylist(), polls.column("value").to_pylist(), strict=True)
        return sorted({(int(k), int(v)) for k, v in pairs})

    def sends_among(self, values: list[int]) -> list[tuple[int, Elem]]:
        if self.file is None:
            from pyspark.sql import functions as F

            table = self.elems.filter(
                (F.col("kind") == "send") & F.col("value").isin(values)
            ).toArrow()
        else:
            table = self._pick(self.columns, _among("send", values))
        sends = table.to_pydict()
        elems = elems_from_columns(sends)
        keys = {
            (i, s): k for i, s, k in zip(sends["index"], sends["seq"], sends["key"], strict=True)
        }
        return [(int(keys[e.index, e.seq]), e) for e in elems]

    def _pick(self, columns: list[str], keep: Callable[[pa.Table], pa.Array]) -> pa.Table:
        """The element rows `keep` marks, only `columns`: one task per row group, each reading
        its row group with pyarrow (a few rows come back, so rows are fine here)."""
        # The columns asked for and the ones the predicates (_info_sends, _among) read.
        read = list(dict.fromkeys([*columns, "kind", "type", "value"]))
        uri, (groups, stored, _) = self.path, self.footer
        schema = pa.schema([_plain(stored.field(c)) for c in columns])
        if not groups:
            return schema.empty_table()

        def pick(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            worker_memory()
            fs, path = pafs.FileSystem.from_uri(uri)
            for batch in ids:
                for task in batch.column("id").to_pylist():
                    with fs.open_input_file(path) as f:
                        table = read_element_row_group(f, groups[task], read)
                    kept = table.filter(keep(table)).select(columns)
                    yield from kept.cast(schema).to_batches()

        tasks = self.spark.range(0, len(groups), 1, len(groups))
        return tasks.mapInArrow(pick, schema=_ddl(schema)).toArrow()

    def check(self, ctx: QueueContext) -> QueueResult:
        if self.file is None:
            return self._check_rows(ctx)
        return self._check_blobs(ctx)

    def _check_rows(self, ctx: QueueContext) -> QueueResult:
        """Element rows from Spark's reader, shuffled by bucket and handed to Python as rows."""
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

    def _check_blobs(self, ctx: QueueContext) -> QueueResult:
        """Row groups read by pyarrow in the workers, shuffled by bucket as Arrow IPC blobs."""
        groups, _, elements = self.footer
        if not groups:
            return finish([], EdgeArrays.empty(), ctx.subscribe)
        buckets = max(
            int(self.spark.conf.get("spark.sql.shuffle.partitions")),
            -(-elements // BUCKET_ELEMENTS),
        )
        uri, columns, per_blob = self.path, self.columns, EDGES_PER_BLOB
        scatter = _scatter(uri, columns, groups, buckets)

        def per_bucket(table: pa.Table) -> pa.Table:
            return _check_blob_bucket(table, ctx, per_blob)

        blobs = self.spark.range(0, len(groups), 1, len(groups))
        out = (
            blobs.mapInArrow(scatter, schema=BLOB_DDL)
            .groupBy("bucket")
            .applyInArrow(per_bucket, schema=RESULT_DDL)
        )
        table = _collect(self.spark, out, buckets)
        findings: list[Finding] = []
        edges: list[EdgeArrays] = []
        for row in range(table.num_rows):
            f, e = table.column("findings")[row], table.column("edges")[row]
            if f.is_valid:
                findings += from_arrow(_from_ipc(f.as_buffer()))[0]
            if e.is_valid:
                edges.append(_edges(_from_ipc(e.as_buffer())))
        return finish(findings, edges or [EdgeArrays.empty()], ctx.subscribe)


def _info_sends(table: pa.Table) -> pa.Array:
    return pc.and_(
        pc.and_(pc.equal(table.column("kind").cast(pa.string()), "send"),
                pc.equal(table.column("type").cast(pa.string()), "info")),
        pc.is_valid(table.column("value")),
    )  # fmt: skip


def _among(kind: str, values: list[int]) -> Callable[[pa.Table], pa.Array]:
    wanted = pa.array(values, pa.int64())

    def keep(table: pa.Table) -> pa.Array:
        return pc.and_(
            pc.equal(table.column("kind").cast(pa.string()), kind),
            pc.fill_null(pc.is_in(table.column("value"), value_set=wanted), False),
        )

    return keep


def _plain(field: pa.Field) -> pa.Field:
    """A column as Spark takes it back from Python: dictionaries as their values."""
    if pa.types.is_dictionary(field.type):
        return pa.field(field.name, field.type.value_type)
    return field


_DDL = {pa.int64(): "long", pa.int32(): "int", pa.int8(): "byte", pa.bool_(): "boolean",
        pa.string(): "string", pa.float64(): "double"}  # fmt: skip


def _ddl(schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {_DDL[f.type]}" for f in schema)


def _open_file(file: tuple[pafs.FileSystem, str] | None) -> Any:
    assert file is not None
    fs, path = file
    return fs.open_input_file(path)


def _pyarrow_file(uri: str) -> tuple[pafs.FileSystem, str] | None:
    """The history as pyarrow opens it, None when pyarrow cannot (a scheme it lacks)."""
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        if fs.get_file_info(path).type != pafs.FileType.File:
            return None
    except (pa.ArrowException, OSError, ValueError):
        return None
    return fs, path


def bucket_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    """A key's bucket: Fibonacci hashing, so that keys 0..k spread evenly over any count."""
    mixed = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return ((mixed >> np.uint64(32)) % np.uint64(buckets)).astype(np.int32)


def _scatter(
    uri: str, columns: list[str], groups: list[int], buckets: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The map task of the blob path: row group ids in, one blob per (row group, bucket) out."""

    def scatter(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        worker_memory()
        fs, path = pafs.FileSystem.from_uri(uri)
        for batch in ids:
            for task in batch.column("id").to_pylist():
                rg = groups[task]
                with fs.open_input_file(path) as f:
                    table = read_element_row_group(f, rg, columns)
                keys = table.column("key").fill_null(0).to_numpy()
                bucket = bucket_of(keys, buckets)
                order = np.argsort(bucket, kind="stable")
                ends = np.cumsum(np.bincount(bucket, minlength=buckets))
                table = table.take(pa.array(order))
                out_b, out_blob, start = [], [], 0
                for b, end in enumerate(ends.tolist()):
                    if end > start:
                        out_b.append(b)
                        out_blob.append(_to_ipc(table.slice(start, end - start)))
                    start = end
                yield pa.RecordBatch.from_pydict(
                    {"bucket": out_b, "rg": [rg] * len(out_b), "blob": out_blob},
                    schema=pa.schema(
                        [("bucket", pa.int32()), ("rg", pa.int32()), ("blob", pa.binary())]
                    ),
                )

    return scatter


def _check_blob_bucket(table: pa.Table, ctx: QueueContext, per_blob: int) -> pa.Table:
    """One bucket's blobs, in file order (so elements arrive sorted by index), checked."""
    worker_memory()
    order = np.argsort(table.column("rg").to_numpy(), kind="stable")
    blobs = table.column("blob").take(pa.array(order))
    bucket = table.column("bucket")[0].as_py()
    elems = pa.concat_tables([_from_ipc(b.as_buffer()) for b in blobs])
    del table, blobs
    findings, edges = check_arrays(elem_arrays(elems, producers=ctx.producers), ctx)
    del elems
    parts = max(1, -(-len(edges) // per_blob))
    rows: dict[str, list] = {"bucket": [], "part": [], "findings": [], "edges": []}
    for part in range(parts):
        lo, hi = part * per_blob, min(len(edges), (part + 1) * per_blob)
        rows["bucket"].append(bucket)
        rows["part"].append(part)
        rows["findings"].append(
            _to_ipc(to_arrow(findings, EdgeArrays.empty())) if part == 0 and findings else None
        )
        rows["edges"].append(_to_ipc(_edge_table(edges, lo, hi)) if hi > lo else None)
    return pa.table(
        rows,
        schema=pa.schema(
            [
                ("bucket", pa.int32()),
                ("part", pa.int32()),
                ("findings", pa.binary()),
                ("edges", pa.binary()),
            ]
        ),
    )


def _edge_table(edges: EdgeArrays, lo: int, hi: int) -> pa.Table:
    return pa.table(
        {name: getattr(edges, name)[lo:hi] for name in EDGE_SCHEMA.names}, schema=EDGE_SCHEMA
    )


def _edges(table: pa.Table) -> EdgeArrays:
    def col(name: str) -> np.ndarray:
        return table.column(name).to_numpy()

    return EdgeArrays(*(col(name) for name in EDGE_SCHEMA.names))


def _to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=os.environ.get("KCHAOS_BLOB_CODEC", "lz4"))
    with pa.ipc.new_stream(sink, table.schema, options=options) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(buf: pa.Buffer) -> pa.Table:
    return pa.ipc.open_stream(buf).read_all()


def _collect(spark: object, df: object, buckets: int) -> pa.Table:
    """df.toArrow(), with the settings of this job only: results in batches of a few blobs
    (Arrow's 2 GiB per binary column of a batch would not hold a 100M-op history's edges in
    one), and one shuffle partition per bucket, none merged: the blobs are few and small, so
    adaptive execution would merge them into a task or two, and two busy cores would then
    wait on the largest."""
    conf = spark.conf  # type: ignore[attr-defined]
    settings = {
        "spark.sql.execution.arrow.maxRecordsPerBatch": os.environ.get(
            "KCHAOS_SPARK_BLOBS_PER_BATCH", "16"
        ),
        "spark.sql.shuffle.partitions": str(buckets),
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    }
    before = {k: conf.get(k, None) for k in settings}
    for k, v in settings.items():
        conf.set(k, v)
    try:
        return df.toArrow()  # type: ignore[attr-defined]
    finally:
        for k, v in before.items():
            if v is None:
                conf.unset(k)
            else:
                conf.set(k, v)


def check_bucket(table: pa.Table, ctx: QueueContext) -> pa.Table:
    """Every finding and edge of the keys in one bucket (whole keys: a key is never split)."""
    findings, edges = check_arrays(elem_arrays(table, producers=ctx.producers), ctx)
    return to_arrow(findings, edges)
