"""One place that knows how kchaos starts Spark (starting it costs seconds: share the session).

Spark's own console output (JVM warnings, log4j lines, `[Stage 0:>...]` bars) must not spill into
kchaos's: the progress bar is off, log4j logs only errors, and the JVM's stderr goes to a log
file. A local session, and one on a master at 127.0.0.1, binds to loopback only, so its driver
never listens on the host's network address (nor logs that the hostname "resolves to a loopback
address"). A Spark Connect URL (sc://) gives a Connect client: no JVM here, and only the DataFrame
API, which is all kchaos uses (no SparkContext, no RDD): docs/spark.md.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = (LOOPBACK, "localhost", "::1")
# log4j2 for the driver JVM: errors only, to its stderr (which spark_session sends to a file).
# The root level holds from the JVM's start (Spark's "Setting default log level to WARN" line
# is about a filter below it), so no SparkContext.setLogLevel call is needed, which a Connect
# session could not make.
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


def is_connect(master: str | None) -> bool:
    """A Spark Connect URL (sc://host:port): the session is a client of a remote server."""
    return bool(master) and master.startswith("sc://")


# What --spark-master takes (kchaos check, kchaos analyze): named in their help and refusals.
MASTER_FORMS = (
    "local, local[N], local[*], spark://HOST:PORT[,HOST:PORT...], yarn, k8s://URL, "
    "or sc://HOST[:PORT] (Spark Connect)"
)
_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]{0,5})(,[1-9][0-9]{0,5})?\])?")
_HOST = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?)"
_HOST_PORT = re.compile(_HOST + r":([0-9]{1,5})")
_CONNECT = re.compile(r"sc://" + _HOST + r"(:([0-9]{1,5}))?(/;\S*)?")


def _port_ok(text: str | None) -> bool:
    return text is None or 1 <= int(text) <= 65535


def master_problem(master: str) -> str | None:
    """Why `master` is no Spark master kchaos can start a session on (None: it is one), checked
    before any work: the forms MASTER_FORMS names, ports 1..65535."""
    said = f"--spark-master {master!r}: "
    if _LOCAL.fullmatch(master) or master == "yarn":
        return None
    if master.startswith("spark://"):
        parts = master[len("spark://") :].split(",")
        if all((m := _HOST_PORT.fullmatch(p)) and _port_ok(m.group(3)) for p in parts):
            return None
        return said + "a standalone master is spark://HOST:PORT (several: spark://H1:P1,H2:P2)"
    if master.startswith("k8s://"):
        rest = master[len("k8s://") :]
        if rest and not any(c.isspace() for c in rest):
            return None
        return said + "a Kubernetes master is k8s://URL of the API server (k8s://https://HOST:PORT)"
    if master.startswith("sc://"):
        m = _CONNECT.fullmatch(master)
        if m and _port_ok(m.group(4)):
            return None
        return said + "a Spark Connect server is sc://HOST[:PORT] (port 1..65535)"
    return said + f"not a Spark master: give {MASTER_FORMS}"


def binds_loopback(master: str | None) -> bool:
    """Whether the driver listens on 127.0.0.1 only: for local[*], and for a master on this
    machine's loopback (spark://127.0.0.1:PORT: its executors reach the driver there). Any other
    master's executors must reach the driver over the network, so Spark's own choice of address
    stands (SPARK_LOCAL_IP or spark.driver.host set it: docs/spark.md)."""
    if not master or master.startswith("local"):
        return True
    host = urlparse(master).hostname if "://" in master else None
    return host in LOOPBACK_NAMES


def spark_path(path: str | Path) -> str:
    """A file of this machine's as Spark must be told it: absolute (a Connect server or an
    executor would resolve a relative path in its own working directory) and file:// (a cluster
    resolves a path without a scheme on its default filesystem: HDFS on YARN). kchaos reads the
    run itself through this machine's filesystem, so executors must see it at the same path
    (docs/spark.md). A URL (hdfs://, s3a://, file://) is passed as it is."""
    text = str(path)
    if "://" in text:
        return text
    return "file://" + str(Path(text).absolute())


def spark_session(
    master: str | None = None,
    shuffle_partitions: int | None = None,
    log_path: str | Path | None = None,
    app_name: str = "kchaos-check",
) -> Any:
    """A SparkSession on `master` (default local[*]; spark://, yarn, k8s://, or sc://host:port
    for Spark Connect) tuned for small shuffles of Arrow batches. The JVM's stderr goes to
    `log_path` (default: kchaos-spark-<uid>.log in the temp dir); `app_name` is what a
    cluster's master lists it as. `shuffle_partitions`: the
    Spark engine's hash buckets; default twice this machine's cores for local[*], the cluster's
    own setting (Spark's default 200) elsewhere, where this machine's cores say nothing."""
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    local = master.startswith("local")
    partitions = shuffle_partitions or ((os.cpu_count() or 2) * 2 if local else None)
    # Settings a running session takes (SQL settings): the only kind a Connect client may set.
    sql_conf = {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
    }
    if partitions:
        sql_conf["spark.sql.shuffle.partitions"] = str(partitions)
    if is_connect(master):
        # No JVM here: the server's driver and executors run the plans (and the Python of the
        # Spark engine's per-bucket function: the server's PYSPARK_PYTHON, with kchaos).
        builder = SparkSession.builder.remote(master)
        for k, v in sql_conf.items():
            builder = builder.config(k, v)
        return builder.getOrCreate()
    # Workers must run the same Python as the driver (the venv with kchaos installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    loopback = binds_loopback(master)
    if loopback:
        # Read by the JVM before any config: without it Spark looks the hostname up, finds
        # loopback and picks eth0's address instead, with a warning.
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        # The driver collects every edge for the cycle search (13M rows at 10M ops), and with
        # local[*] it is the executor too: Spark's default 1g heap ran out at 10M ops.
        .config("spark.driver.memory", os.environ.get("KCHAOS_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_log4j2_file()}")
    )
    for k, v in sql_conf.items():
        builder = builder.config(k, v)
    if loopback:
        builder = builder.config("spark.driver.bindAddress", LOOPBACK).config(
            "spark.driver.host", LOOPBACK
        )
    log = Path(log_path) if log_path else default_log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    with _stderr_to(log):
        # The JVM starts here and keeps the stderr it inherited: the log file.
        return builder.getOrCreate()


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
