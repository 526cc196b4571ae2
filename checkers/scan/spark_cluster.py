"""A Spark cluster on this machine from pyspark's own jars: a standalone master and workers, and
a Spark Connect server. Nothing is downloaded: pip's pyspark ships `bin/spark-class`,
`bin/spark-submit` and every jar these need (the Connect server's included, since Spark 4).

For tests and for trying `kchaos check --spark-master spark://...` or `sc://...` before pointing
kchaos at a real cluster (docs/spark.md shows the same commands by hand):

    python -m checkers.scan.spark_cluster standalone   # prints spark://127.0.0.1:PORT, Ctrl-C stops
    python -m checkers.scan.spark_cluster connect      # prints sc://127.0.0.1:PORT

Everything listens on 127.0.0.1 only: the daemons' RPC ports (`--host`), their web UIs
(Spark's WebUI binds to SPARK_LOCAL_IP, else to every interface), the Connect server's gRPC port
(`spark.connect.grpc.binding.address`) and its driver. Ports are chosen by the JVMs (port 0)
and read back from their logs, so two clusters never race for one port. Readiness is each
daemon's own log line (the master elected leader, the worker registered, the Connect server
started), never a fixed sleep. Each JVM dies with the process that started it (Linux's
parent-death signal), so a killed test leaves no daemon behind.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# The code checkers/ itself is imported from: executors and the Connect server's Python workers
# import the same kchaos (cloudpickle ships the engine's functions by module name).
KCHAOS_ROOT = Path(__file__).resolve().parents[2]

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_ALIVE = "I have been elected leader! New state: ALIVE"
_WORKER_REGISTERED = re.compile(r"Successfully registered with master spark://")
_CONNECT_STARTED = re.compile(r"Spark Connect server started at: /?([\d.]+):(\d+)")


class SparkClusterError(RuntimeError):
    """A daemon exited or did not become ready in time; the message ends with its log's tail."""


def spark_home() -> Path:
    """pyspark's own Spark: bin/, jars/ (SPARK_HOME when set, as spark-submit does)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: SIGTERM when the thread that started us exits; survives exec, so it
    # reaches the JVM that spark-class execs.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Daemon:
    """One JVM started here, its stdout and stderr in `log`."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def wait_for(self, ready: Callable[[str], re.Match[str] | bool | None], timeout: float) -> str:
        """The log once `ready(log)` holds; SparkClusterError if the JVM exits or the time runs
        out first. Polls the log every 0.1 s: the daemon says when it is ready, we listen."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if ready(text):
                return text
            if self.proc.poll() is not None:
                raise SparkClusterError(
                    f"{self.name} exited ({self.proc.returncode}) before it was ready; "
                    f"{self.log}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise SparkClusterError(
                    f"{self.name} not ready after {timeout:.0f} s; {self.log}:\n{self.tail()}"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (the daemons stop cleanly on it), SIGKILL if it has not exited in time."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _start(name: str, cmd: list[str], env: Mapping[str, str], work_dir: Path) -> Daemon:
    log = work_dir / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=work_dir,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own session: a Ctrl-C at the terminal reaches us, and we stop it in order.
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    return Daemon(name, proc, log)


def daemon_env(
    python: str | None = None, pythonpath: str | Path | None = KCHAOS_ROOT
) -> dict[str, str]:
    """The environment every JVM here starts with: loopback only, small daemon heaps, the Python
    its Python workers run (`python`, default this one) and import kchaos from (`pythonpath`)."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_MASTER_HOST=LOOPBACK,
        # The master's and worker's own heaps (not the executors'): they only keep books.
        SPARK_DAEMON_MEMORY=os.environ.get("SPARK_DAEMON_MEMORY", "512m"),
        PYSPARK_PYTHON=python or sys.executable,
        # Spark 4's launcher runs an application in Connect mode when this is 1; the sbin
        # scripts set 0 for the daemons, as we do.
        SPARK_CONNECT_MODE="0",
    )
    if pythonpath:
        parts = [str(pythonpath), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    return env


def _properties(work_dir: Path, name: str, props: Mapping[str, str]) -> Path:
    path = work_dir / f"{name}.properties"
    path.write_text("".join(f"{k} {v}\n" for k, v in props.items()))
    return path


# What the daemons read instead of any spark-defaults.conf: no REST submission server (another
# port), executors' work directories cleaned as soon as their application ends.
_DAEMON_PROPS = {
    "spark.master.rest.enabled": "false",
    "spark.worker.cleanup.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


@dataclass
class Standalone:
    """A standalone master and its workers; `url` is what --spark-master takes."""

    url: str
    master: Daemon
    workers: list[Daemon] = field(default_factory=list)

    def stop(self) -> None:
        for d in [*self.workers, self.master]:
            d.stop()

    def __enter__(self) -> Standalone:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def master_command(properties: str | Path) -> list[str]:
    """The standalone master on 127.0.0.1, its RPC and web UI ports chosen by the JVM."""
    spark_class = str(spark_home() / "bin" / "spark-class")
    ports = f"--host {LOOPBACK} --port 0 --webui-port 0".split()
    return [spark_class, MASTER_CLASS, *ports, "--properties-file", str(properties)]


def worker_command(
    master_url: str, work_dir: str | Path, properties: str | Path, cores: int, memory: str
) -> list[str]:
    """A worker of `master_url` on 127.0.0.1 offering `cores` and `memory` to executors."""
    spark_class = str(spark_home() / "bin" / "spark-class")
    ports = f"--host {LOOPBACK} --port 0 --webui-port 0".split()
    offer = ["--cores", str(cores), "--memory", memory]
    files = ["--work-dir", str(work_dir), "--properties-file", str(properties)]
    return [spark_class, WORKER_CLASS, *ports, *offer, *files, master_url]


def start_standalone(
    work_dir: str | Path,
    *,
    workers: int = 1,
    cores: int = 2,
    memory: str = "2g",
    python: str | None = None,
    pythonpath: str | Path | None = KCHAOS_ROOT,
    timeout: float = 120,
) -> Standalone:
    """A standalone master and `workers` workers, each offering `cores` cores and `memory` to
    executors, all on 127.0.0.1, logs and work directories under `work_dir`. Returns once every
    worker has registered with the master; stops what it started if any step fails."""
    work = Path(work_dir).absolute()
    work.mkdir(parents=True, exist_ok=True)
    env = daemon_env(python, pythonpath)
    props = _properties(work, "daemons", _DAEMON_PROPS)
    cluster = Standalone("", _start("master", master_command(props), env, work))
    try:
        log = cluster.master.wait_for(
            lambda t: _MASTER_ALIVE in t and _MASTER_URL.search(t), timeout
        )
        match = _MASTER_URL.search(log)
        assert match is not None
        cluster.url = match[1]
        for i in range(workers):
            wdir = work / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            cmd = worker_command(cluster.url, wdir, props, cores, memory)
            cluster.workers.append(_start(f"worker-{i}", cmd, env, work))
        for w in cluster.workers:
            w.wait_for(_WORKER_REGISTERED.search, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@dataclass
class ConnectServer:
    """A Spark Connect server; `url` (sc://127.0.0.1:PORT) is what --spark-master takes."""

    url: str
    daemon: Daemon

    def stop(self) -> None:
        self.daemon.stop()

    def __enter__(self) -> ConnectServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def connect_command(
    master: str = "local[2]", port: int = 0, driver_memory: str = "2g"
) -> list[str]:
    """spark-submit running the Connect server on `master`, its gRPC port and its driver bound
    to loopback (`port` 0: one the server picks)."""
    conf = {
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_CLASS]
    cmd += ["--name", "kchaos Spark Connect server", "--master", master]
    cmd += ["--driver-memory", driver_memory]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd


def start_connect(
    work_dir: str | Path,
    *,
    master: str = "local[2]",
    port: int = 0,
    driver_memory: str = "2g",
    python: str | None = None,
    pythonpath: str | Path | None = KCHAOS_ROOT,
    timeout: float = 120,
) -> ConnectServer:
    """A Spark Connect server whose own driver runs on `master` (local[2], or a standalone
    master's URL), on 127.0.0.1; returns once it says it is serving."""
    work = Path(work_dir).absolute()
    work.mkdir(parents=True, exist_ok=True)
    cmd = connect_command(master, port, driver_memory)
    daemon = _start("connect", cmd, daemon_env(python, pythonpath), work)
    try:
        match = _CONNECT_STARTED.search(daemon.wait_for(_CONNECT_STARTED.search, timeout))
        assert match is not None
    except BaseException:
        daemon.stop()
        raise
    return ConnectServer(f"sc://{match[1]}:{match[2]}", daemon)


@contextmanager
def _until_stopped() -> Iterator[None]:
    """Turns SIGTERM into the KeyboardInterrupt that Ctrl-C gives, for one way out."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m checkers.scan.spark_cluster",
        description="Start a Spark standalone cluster or a Spark Connect server on 127.0.0.1 "
        "from pyspark's jars, print its URL for --spark-master, and run until Ctrl-C.",
    )
    ap.add_argument("what", choices=("standalone", "connect"))
    ap.add_argument("--dir", default=None, help="logs and work directories (default: a temp dir)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cores", type=int, default=2, help="cores each worker offers")
    ap.add_argument("--memory", default="2g", help="memory each worker offers its executors")
    ap.add_argument("--master", default="local[2]", help="the Connect server's own master")
    ap.add_argument("--port", type=int, default=0, help="the Connect server's port (0: any)")
    args = ap.parse_args(argv)
    work = Path(args.dir or tempfile.mkdtemp(prefix=f"kchaos-spark-{args.what}-"))
    with _until_stopped():
        try:
            if args.what == "standalone":
                server: Standalone | ConnectServer = start_standalone(
                    work, workers=args.workers, cores=args.cores, memory=args.memory
                )
            else:
                server = start_connect(work, master=args.master, port=args.port)
        except KeyboardInterrupt:
            return
        print(server.url, flush=True)
        print(f"logs in {work}; Ctrl-C stops it", file=sys.stderr, flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()


if __name__ == "__main__":
    main()
