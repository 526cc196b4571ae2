"""Per-run operation statistics of many histories in one Spark job."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pandas as pd

from checkers.scan.spark_session import spark_path
from history.effects import START
from history.format import CLIENT_PROCESS_TEXT, NEMESIS


def op_stats(spark: Any, parquets: list[Path]) -> pd.DataFrame:
    """One row per history: ok / fail / info client completions, faults injected, seconds."""
    from pyspark.sql import functions as F

    if not parquets:
        return pd.DataFrame(columns=["path", "ok", "fail", "info", "faults", "seconds"])
    df = spark.read.parquet(*[spark_path(p) for p in parquets]).where(F.col("row") == "op")
    df = df.withColumn("path", F.input_file_name())
    client = F.col("process").rlike(f"^({CLIENT_PROCESS_TEXT})$")

    def count(cond: Any) -> Any:
        return F.sum(F.when(cond, 1).otherwise(0))

    stats = df.groupBy("path").agg(
        count(client & (F.col("type") == "ok")).alias("ok"),
        count(client & (F.col("type") == "fail")).alias("fail"),
        count(client & (F.col("type") == "info")).alias("info"),
        count(
            (F.col("process") == NEMESIS)
            & (F.col("type") == "invoke")
            & F.col("f").startswith(START)
        ).alias("faults"),
        (F.max("time") / 1e9).alias("seconds"),
    )
    out = stats.toPandas()
    # input_file_name() is a URI; the run is the file's directory.
    out["path"] = out["path"].map(lambda u: str(Path(unquote(urlparse(u).path)).parent.resolve()))
    return out
