"""One place that knows how kchaos starts Spark (starting it costs seconds: share the session)."""

from __future__ import annotations

import os
import sys
from typing import Any


def spark_session(master: str | None = None, shuffle_partitions: int | None = None) -> Any:
    """A SparkSession on `master` (default local[*]) tuned for small shuffles of Arrow batches."""
    from pyspark.sql import SparkSession

    # Workers must run the same Python as the driver (the venv with kchaos installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = master or "local[*]"
    partitions = shuffle_partitions or (os.cpu_count() or 2) * 2
    return (
        SparkSession.builder.master(master)
        .appName("kchaos-check")
        # The driver collects every edge for the cycle search (13M rows at 10M ops), and with
        # local[*] it is the executor too: Spark's default 1g heap ran out at 10M ops.
        .config("spark.driver.memory", os.environ.get("KCHAOS_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .getOrCreate()
    )
