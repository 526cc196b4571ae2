"""One place that knows how kchaos starts Spark (starting it costs seconds: share the session).

Spark's own console output (JVM warnings, log4j lines, `[Stage 0:>...]` bars) must not spill into
kchaos's: the progress bar is off, log4j logs only errors, and the JVM's stderr goes to a log
file. A local session binds to loopback only, so its driver never listens on the host's network
address (nor logs that the hostname "resolves to a loopback address").
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
# log4j2 for the driver JVM: errors only, to its stderr (which spark_session sends to a file).
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = STDERR
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j2_file() -> Path:
    path = Path(tempfile.gettempdir()) / f"kchaos-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)
    return path


def default_log_path() -> Path:
    return Path(tempfile.gettempdir()) / f"kchaos-spark-{os.getuid()}.log"


def spark_session(
    master: str | None = None,
    shuffle_partitions: int | None = None,
    log_path: str | Path | None = None,
) -> Any:
    """A SparkSession on `master` (default local[*]) tuned for small shuffles of Arrow batches.
    The JVM's stderr goes to `log_path` (default: kchaos-spark-<uid>.log in the temp dir)."""
    from pyspark.sql import SparkSession

    # Workers must run the same Python as the driver (the venv with kchaos installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = master or "local[*]"
    local = master.startswith("local")
    if local:
        # Read by the JVM before any config: without it Spark looks the hostname up, finds
        # loopback and picks eth0's address instead, with a warning.
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    partitions = shuffle_partitions or (os.cpu_count() or 2) * 2
    builder = (
        SparkSession.builder.master(master)
        .appName("kchaos-check")
        # The driver collects every edge for the cycle search (13M rows at 10M ops), and with
        # local[*] it is the executor too: Spark's default 1g heap ran out at 10M ops.
        .config("spark.driver.memory", os.environ.get("KCHAOS_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_log4j2_file()}")
    )
    if local:
        builder = builder.config("spark.driver.bindAddress", LOOPBACK).config(
            "spark.driver.host", LOOPBACK
        )
    log = Path(log_path) if log_path else default_log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    with _stderr_to(log):
        # The JVM starts here and keeps the stderr it inherited: the log file.
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class _stderr_to:
    """Points file descriptor 2 at `path` for the block (a child process started inside it
    keeps the file), then restores it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        sys.stderr.flush()
        self.saved = os.dup(2)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
