"""Recorded sends per second: kchaos's pipelined queue beside Kafka's own perf producer.

On one kraft-combined cluster (3 nodes, Kafka 3.9 unless --version):

(b) ``kchaos run --workload queue --send-mode async --rate 0 --time-limit 30`` as a user runs
    it (its own process, every operation recorded, the run checked), keeping the cluster;
(a) then Kafka's ``org.apache.kafka.tools.ProducerPerformance`` from the cached jars, on the host
    (it is a client: it talks only to the cluster's addresses), acks=all and
    enable.idempotence=true, into a topic shaped as kchaos's (same partitions, replication 3,
    min.insync.replicas 2), records of kchaos's size (its values are 10 decimal digits), for the
    same number of seconds.

Prints the ok sends per second of each and their ratio, and writes ``bench/out/throughput.json``.

With ``--kill`` both runs also take one single-node fault at the same times: the leader of one of
the topic's partitions is SIGKILLed a third of the way in and started again at two thirds. kchaos
gets it from its own nemesis (``--nemesis kill:partition-leader`` with an interval of a third of
the run: exactly one window), the perf tool from the bench (``docker kill`` of the node kchaos
killed when it leads one of the perf topic's partitions, else partition 0's leader, then
``docker start``). For each: ok sends/s before the kill, from the kill to the restart and after
it, and the seconds from the restart to the first ok after it. kchaos's come from its history
(the nemesis ops' completions, the sends' ok completions); the perf tool prints a line only per
5-second window (3.9's ProducerPerformance has no shorter interval), so the bench also samples
the perf topic's high watermarks every 0.25 s (with acks=all a record can be acknowledged only
once the high watermark passed it) for the first ok after the restart; its ok/s per phase come
from its window lines, each line's records spread evenly over its window.
Goal: kchaos >= 50% of the perf tool and >= 5,000 recorded ok sends/s. The perf tool runs
second, on a cluster kchaos has warmed up; both run on the same 2 cores as the brokers.
``goal_met`` judges the checked run (from a fresh cluster) against the perf tool on that warmed
cluster; with the jvm client two like-for-like cells are reported beside it: the perf tool on a
fresh cluster from a fresh JVM (``jvm_cold_ratio``) and the run's recording slots alone on the
warmed cluster (``jvm_warm_ratio``).

    .venv/bin/python bench/bench_throughput.py [--seconds 30] [--concurrency 2] [--in-flight 2000]
        [--kill] [--clients librdkafka,java,jvm] [--jvm-seconds S] [--jvm-in-flight 100000]
        [--keep-runs DIR]

Each client in ``--clients`` (default all three, librdkafka first) gets its own kchaos run on a
fresh cluster; the perf tool runs on the cluster the last one kept. ``java`` is the Java client
with every send recorded by the harness, ``jvm`` the Java client recording its own sends in its
JVM (docs/history.md, "Sends recorded in the JVM"), with its own time limit and sends in flight
(``run_shape`` says why). The goal is judged on the client that recorded the most; every
client's figures and ratio are printed and kept.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

from confluent_kafka import KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from clusters.cluster import UpOptions
from clusters.docker_labels import container_name
from clusters.docker_lifecycle import DockerCluster
from clusters.engine import client
from clusters.kafka_dist import load_dist
from clusters.topology import build_topology
from harness.plan import client_rng_prefix
from workloads.java_host import JavaHost
from workloads.java_recorded import record_args
from workloads.pipelined import SlotSetup

OUT = Path(__file__).parent / "out"
ROOT = Path(__file__).resolve().parent.parent
CLUSTER, SUBNET = "kasync", "10.213.161.0/24"
KAFKA_CACHE = Path.home() / ".cache" / "kchaos" / "kafka"
PERF_TOPIC = "kchaos-perf"
# kchaos's values: producer q's n-th value is q * 10^9 + n, 10 digits; its keys 1 digit.
RECORD_SIZE = 10
WINDOW = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec")


# The bench's clients: how each is asked of `kchaos run`. `java` is the Java client with every
# send through the harness's recorder (as librdkafka's), `jvm` the Java client recording its
# own sends in its JVM (history/merge.py), the Java client's default.
CLIENT_ARGS = {
    "librdkafka": ["--client", "librdkafka"],
    "java": ["--client", "java", "--send-recorder", "harness"],
    "jvm": ["--client", "java", "--send-recorder", "jvm"],
}


def run_shape(args: argparse.Namespace, kafka_client: str) -> tuple[float, int]:
    """(seconds, sends in flight per producer) of `kafka_client`'s run. The JVM-recorded run
    keeps 50x more sends in flight: the rate is lanes / latency, and a fresh cluster's first
    seconds are slow (on one fresh cluster 100,000 lanes recorded 1.24M sends in 6 s where
    10,000 recorded 0.38M; the perf tool is bounded only by its 32 MB buffer.memory, hundreds
    of thousands of these records), and kchaos sends to a random partition, which fills
    smaller batches than the perf tool's sticky partitioner. It runs as long as the perf tool
    unless --jvm-seconds says otherwise: at ~0.3M sends a second its 30 s are ~8M sends, whose
    final reads, Parquet copy (history/stream.py) and check take ~20 minutes here
    (docs/clients.md)."""
    if kafka_client == "jvm":
        return args.jvm_seconds, args.jvm_in_flight
    return args.seconds, args.in_flight


def kchaos_run(args: argparse.Namespace, results: Path, kafka_client: str) -> dict[str, float]:
    """One `kchaos run` in its own process with `kafka_client`, cluster kept; what its history
    recorded."""
    seconds, in_flight = run_shape(args, kafka_client)
    cmd = [
        sys.executable, "-m", "harness.cli", "run",
        "--workload", "queue", "--send-mode", "async", "--rate", "0",
        "--time-limit", f"{seconds:g}", "--concurrency", str(args.concurrency),
        "--in-flight", str(in_flight), "--linger-ms", str(args.linger_ms),
        "--keys", str(args.keys), "--version", args.version, "--timing", "fast",
        "--cluster", args.name, "--subnet", args.subnet, "--results-dir", str(results),
        "--name", "throughput", "--seed", "1", "--keep-cluster", *CLIENT_ARGS[kafka_client],
    ]  # fmt: skip
    if args.kill:
        # One window: the kill at a third of the run, the restart at two thirds, none after.
        cmd += ["--nemesis", "kill:partition-leader", "--nemesis-interval", f"{seconds / 3:g}"]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    run_dir = (results / "latest").resolve()
    if not any((run_dir / n).is_file() for n in ("history.jsonl", "history.parquet")):
        raise SystemExit(f"kchaos run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    out = {
        **count_history(run_dir / "history.jsonl"),
        **run_json(run_dir),
        "wall_s": round(wall, 1),
        "time_limit_s": seconds,
        "in_flight": in_flight,
    }
    if args.kill:
        out["fault"] = history_phases(run_dir / "history.jsonl")
    return out


def history_phases(path: Path) -> dict[str, object]:
    """Ok sends/s before the kill, kill to restart, and after; seconds from the restart to the
    first ok send after it. The kill is the start-kill op's completion (the node has exited), the
    restart the stop-kill op's (its JVM runs again: not yet serving, which is what we measure)."""
    oks: list[int] = []
    first = last = kill = restart = None
    node = None
    for line in _op_lines(path):
        op = json.loads(line)
        if op["process"] == "nemesis" and op["type"] == "ok":
            if op["f"] == "start-kill":
                kill, node = op["time"], (op["value"].get("targets") or [None])[0]
            elif op["f"] == "stop-kill":
                restart = op["time"]
            continue
        if op["f"] != "send" or not isinstance(op["process"], int):
            continue
        first = op["time"] if first is None else first
        last = op["time"]
        if op["type"] == "ok":
            oks.append(op["time"])
    if kill is None or restart is None or first is None or last is None:
        raise SystemExit(f"{path}: no kill and restart by the nemesis, or no sends")
    return {
        "node": node,
        "kill_s": round((kill - first) / 1e9, 3),
        "restart_s": round((restart - first) / 1e9, 3),
        **phase_rates([(t / 1e9, 1) for t in oks], first / 1e9, kill / 1e9, restart / 1e9,
                      last / 1e9),
        "first_ok_after_restart_s": _first_after([t / 1e9 for t in oks], restart / 1e9),
        "longest_ok_gap_s": _longest_gap([t / 1e9 for t in oks], kill / 1e9, last / 1e9),
    }  # fmt: skip


def phase_rates(
    events: list[tuple[float, int]], first: float, kill: float, restart: float, last: float
) -> dict[str, float]:
    """Ok/s in [first, kill), [kill, restart) and [restart, last] from (time, count) events."""
    edges = {"before": (first, kill), "during": (kill, restart), "after": (restart, last)}
    out: dict[str, float] = {}
    for name, (a, b) in edges.items():
        n = sum(c for t, c in events if a <= t < b or (name == "after" and t == b))
        out[f"{name}_ok_per_s"] = round(n / (b - a), 1) if b > a else 0.0
    return out


def _first_after(times: list[float], t0: float) -> float | None:
    later = [t for t in times if t >= t0]
    return round(min(later) - t0, 3) if later else None


def _longest_gap(times: list[float], a: float, b: float) -> float:
    """The longest stretch of [a, b] with no ok in it."""
    inside = sorted(t for t in times if a <= t <= b)
    points = [a, *inside, b]
    return round(max(y - x for x, y in itertools.pairwise(points)), 3)


def _op_lines(path: Path) -> Iterator[bytes]:
    """The op lines of a history.jsonl; when there is none (a built history keeps
    history.parquet alone), those derived from the history.parquet beside it."""
    from history.export import op_lines

    return op_lines(path)


def count_history(path: Path) -> dict[str, float]:
    """Client sends by outcome, and the span from the first send's invocation to the last
    send's completion (the workload's own seconds, without setup or final reads); beside the
    rate over the whole span, the rate over its second half (`steady_ok_per_s`: a producer
    started cold on a cluster started cold takes seconds to reach its pace)."""
    counts = {"ok": 0, "fail": 0, "info": 0, "invoke": 0}
    first = last = None
    oks: list[int] = []
    for line in _op_lines(path):
        op = json.loads(line)
        if op["f"] != "send" or not isinstance(op["process"], int):
            continue
        counts[op["type"]] += 1
        first = op["time"] if first is None else first
        last = op["time"]
        if op["type"] == "ok":
            oks.append(op["time"])
    span = ((last or 0) - (first or 0)) / 1e9
    out: dict[str, float] = {f"{k}_sends": v for k, v in counts.items()}
    out["span_s"] = round(span, 3)
    out["ok_per_s"] = round(counts["ok"] / span, 1) if span else 0.0
    out["recorded_ops_per_s"] = round((counts["invoke"] * 2) / span, 1) if span else 0.0
    if span:
        mid = (first or 0) + ((last or 0) - (first or 0)) // 2
        late = sum(1 for t in oks if t >= mid)
        out["steady_ok_per_s"] = round(late / (((last or 0) - mid) / 1e9), 1)
    return out


def run_json(run_dir: Path) -> dict[str, object]:
    run = json.loads((run_dir / "run.json").read_text())
    final = run.get("final_reads") or {}
    return {
        "kafka_version": run.get("kafka_version"),
        "check": (run.get("check") or {}).get("status"),
        "final_reads_complete": final.get("complete"),
        "run_dir": str(run_dir),
    }


class Watermarks(threading.Thread):
    """Samples the sum of a topic's high watermarks every 0.25 s until stopped. A partition
    whose leader does not answer keeps its last value (a high watermark never goes back)."""

    def __init__(self, admin: AdminClient, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.admin, self.stopping = admin, threading.Event()
        self.parts = [TopicPartition(topic, p) for p in range(partitions)]
        self.last = dict.fromkeys(range(partitions), 0)
        self.samples: list[tuple[float, int]] = []

    def run(self) -> None:
        while not self.stopping.wait(0.25):
            # One request per partition: a dead leader's timeout then fails only its own.
            futs = [
                (tp, f)
                for tp in self.parts
                for f in self.admin.list_offsets(
                    {tp: OffsetSpec.latest()}, request_timeout=1
                ).values()
            ]
            for tp, fut in futs:
                with contextlib.suppress(Exception):
                    self.last[tp.partition] = max(self.last[tp.partition], fut.result().offset)
            self.samples.append((time.monotonic(), sum(self.last.values())))


class LeaderKill(threading.Thread):
    """At `at` seconds docker-kills the node's container, at `back` starts it again."""

    def __init__(self, container: str, t0: float, at: float, back: float) -> None:
        super().__init__(daemon=True)
        self.container, self.t0, self.at, self.back = container, t0, at, back
        self.killed = self.restarted = None  # monotonic times, once done
        self.error: str | None = None

    def run(self) -> None:
        try:
            time.sleep(max(0.0, self.t0 + self.at - time.monotonic()))
            subprocess.run(["docker", "kill", self.container], check=True, capture_output=True)
            self.killed = time.monotonic()
            time.sleep(max(0.0, self.t0 + self.back - time.monotonic()))
            subprocess.run(["docker", "start", self.container], check=True, capture_output=True)
            self.restarted = time.monotonic()
        except subprocess.CalledProcessError as e:
            self.error = f"{e.cmd}: {e.stderr!r}"


def perf_victim(admin: AdminClient, topo_nodes: dict[int, str], prefer: str | None) -> str:
    """The node kchaos killed when it leads one of the perf topic's partitions, else the leader
    of partition 0: the same kind of node, a partition leader."""
    # A topic just created is unknown to a broker until its metadata reaches it: ask again.
    deadline = time.monotonic() + 30
    while True:
        try:
            fut = admin.describe_topics(TopicCollection([PERF_TOPIC]))[PERF_TOPIC]
            desc = fut.result(timeout=10)
            leaders = {p.id: topo_nodes[p.leader.id] for p in desc.partitions if p.leader}
            if 0 in leaders:
                break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise SystemExit(f"{PERF_TOPIC}: partition 0 has no leader after 30 s")
        time.sleep(0.2)
    if prefer in leaders.values():
        return str(prefer)
    return leaders[0]


def window_rates(lines: list[tuple[float, int]], kill: float, restart: float) -> dict[str, float]:
    """Ok/s before, during and after the fault from the tool's own window lines: a line at t
    counts the records acknowledged since the line before, spread evenly over that stretch.
    The first line's stretch is left out (it holds the JVM's start-up)."""
    edges = {"before": (lines[0][0], kill), "during": (kill, restart),
             "after": (restart, lines[-1][0])}  # fmt: skip
    out: dict[str, float] = {}
    for name, (a, b) in edges.items():
        n = 0.0
        for (s, _), (e, count) in itertools.pairwise(lines):
            n += count * max(0.0, min(b, e) - max(a, s)) / (e - s)
        out[f"{name}_ok_per_s"] = round(n / (b - a), 1) if b > a else 0.0
    return out


def perf_phases(
    hw: list[tuple[float, int]],
    lines: list[tuple[float, int]],
    t0: float,
    kill: LeaderKill,
    end: float,
) -> dict[str, object]:
    """The perf tool's phases from its own window lines, and the first growth of the high
    watermarks after the restart (the samples' view of the phases beside them)."""
    if kill.killed is None or kill.restarted is None:
        raise SystemExit(f"the perf tool's kill did not happen: {kill.error}")
    if len(lines) < 2:
        raise SystemExit("ProducerPerformance printed fewer than two windows")
    events = [(t, b - a) for (_, a), (t, b) in itertools.pairwise(hw) if b > a]
    # From the first records seen acknowledged: the tool's JVM takes a second to start.
    start = events[0][0] if events else t0
    marks = phase_rates(events, start, kill.killed, kill.restarted, end)
    out: dict[str, object] = {
        "kill_s": round(kill.killed - t0, 3),
        "restart_s": round(kill.restarted - t0, 3),
        **window_rates(lines, kill.killed, kill.restarted),
        "first_ok_after_restart_s": _first_after([t for t, _ in events], kill.restarted),
        "longest_ok_gap_s": _longest_gap([t for t, _ in events], kill.killed, end),
        "sample_s": 0.25,
        "high_watermark_ok_per_s": marks,
        "window_lines": [
            {"at_s": round(t - t0, 2), "records": n} for t, n in lines
        ],
    }  # fmt: skip
    return out


def perf_tool(
    args: argparse.Namespace,
    bootstrap: str,
    version: str,
    kchaos_victim: str | None = None,
    topo_nodes: dict[int, str] | None = None,
    reporting_ms: int | None = None,
) -> dict[str, object]:
    """ProducerPerformance for `args.seconds`: records/s over its complete 5-second windows
    (`reporting_ms`: windows that long instead, Kafka 4.x); with --kill, the same single-node
    kill as kchaos's, and its phases."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(PERF_TOPIC, args.keys, 3, config={"min.insync.replicas": "2"})
    for fut in admin.create_topics([topic], operation_timeout=30).values():
        fut.result(timeout=60)
    libs = KAFKA_CACHE / version / "libs"
    cmd = [
        "java", "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance",
        "--topic", PERF_TOPIC, "--num-records", "1000000000", "--record-size", str(RECORD_SIZE),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
        "enable.idempotence=true", f"linger.ms={args.linger_ms:g}",
    ]  # fmt: skip
    if reporting_ms is not None:
        cmd += ["--reporting-interval", str(reporting_ms)]
    killer = marks = None
    if args.kill:
        victim = perf_victim(admin, topo_nodes or {}, kchaos_victim)
        # Its own client, quiet: librdkafka logs every refused connection to the killed node.
        quiet = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        marks = Watermarks(quiet, PERF_TOPIC, args.keys)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t0 = time.monotonic()
    if marks is not None:
        killer = LeaderKill(container_name(args.name, victim), t0, args.seconds / 3,
                            2 * args.seconds / 3)  # fmt: skip
        marks.start()
        killer.start()
    windows: list[tuple[int, float]] = []
    lines: list[tuple[float, int]] = []
    deadline = time.monotonic() + args.seconds + 1
    try:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), True)
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = WINDOW.match(line)
            if m:
                windows.append((int(m.group(1)), float(m.group(2))))
                lines.append((time.monotonic(), int(m.group(1))))
    finally:
        end = time.monotonic()
        proc.terminate()
        proc.wait(10)
        if marks is not None:
            marks.stopping.set()
            marks.join(5)
        if killer is not None:
            killer.join(2 * args.seconds)
    if not windows:
        raise SystemExit("ProducerPerformance printed no window")
    records = sum(n for n, _ in windows)
    seconds = sum(n / rate for n, rate in windows if rate)
    # The windows after the first (which holds the tool's JVM start), as kchaos's second half.
    later = windows[1:] or windows
    out: dict[str, object] = {
        "records": records,
        "seconds": round(seconds, 2),
        "ok_per_s": round(records / seconds, 1),
        "steady_ok_per_s": round(sum(n for n, _ in later) / sum(n / r for n, r in later if r), 1),
        "windows_per_s": [rate for _, rate in windows],
    }
    if marks is not None and killer is not None:
        out["fault"] = {"node": victim, **perf_phases(marks.samples, lines, t0, killer, end)}
    return out


def jvm_slots_warm(
    args: argparse.Namespace, run_dir: Path, bootstrap: str, version: str
) -> dict[str, object]:
    """The jvm run's recording alone, on the cluster it kept and the perf tool then warmed:
    its `--concurrency` slots, each the same `record` request `kchaos run` sends (the same
    producer settings, `--jvm-in-flight` lanes, the run's topic and keys; side files written
    as in a run), for the jvm run's seconds, counted by the slots' own stats. Not merged nor
    checked: what it measures is the recording on a warm cluster (from a fresh JVM, as the
    perf tool), beside the perf tool's figure there; the checked run is the same code on a fresh
    cluster. Its values repeat the run's (an unchecked topic's contents)."""
    gen = json.loads((run_dir / "plan.json").read_text())["generator"]
    wl = SimpleNamespace(keys=int(gen["keys"]), topic=gen["topic"], gen=gen, bootstrap=bootstrap)
    dist = load_dist(version)
    if dist is None:
        raise SystemExit(f"Kafka {version} is not assembled: run `make setup`")
    host = JavaHost(dist)
    samples: list[tuple[float, int]] = []
    try:
        with tempfile.TemporaryDirectory() as side:
            t0 = time.monotonic_ns()
            setup = SlotSetup(
                side_dir=Path(side), t0_ns=t0, seed_prefix=client_rng_prefix(2),
                concurrency=args.concurrency, lanes=args.jvm_in_flight, interval_s=0.0,
                start_delay_s=0.0, drain_s=5.0,
            )  # fmt: skip
            handles = []
            for slot in range(args.concurrency):
                h = host.handle()
                host.call("record", h, *record_args(wl, slot, setup), timeout=60)
                handles.append(h)
            started = time.monotonic()
            end = started + args.jvm_seconds
            while (now := time.monotonic()) < end:
                ok = sum(int(host.call("rstats", h, timeout=15)["ok"]) for h in handles)
                samples.append((now - started, ok))
                time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            span = time.monotonic() - started
            final = [host.call("rstop", h, timeout=60) for h in handles]
    finally:
        host.close()
    # The oks at the end of the span: those the drain acknowledged after it are not counted.
    ok = sum(int(host_stats["ok"]) for host_stats in final)
    at_end = max((n for t, n in samples), default=0)
    half = [(t, n) for t, n in samples if t >= span / 2]
    steady = (at_end - half[0][1]) / (samples[-1][0] - half[0][0]) if len(half) > 1 else 0.0
    return {
        "ok_sends": at_end,
        "ok_after_drain": ok,
        "span_s": round(samples[-1][0] if samples else span, 2),
        "ok_per_s": round(at_end / samples[-1][0], 1) if samples and samples[-1][0] else 0.0,
        "steady_ok_per_s": round(steady, 1),
        "fail": sum(int(s["fail"]) for s in final),
        "info": sum(int(s["info"]) for s in final),
        "in_flight": args.jvm_in_flight,
    }


def perf_cold(args: argparse.Namespace, dc: DockerCluster, version: str) -> dict[str, object]:
    """ProducerPerformance as the jvm client's run starts: on a cluster brought up afresh,
    from a fresh JVM, for the jvm run's seconds, in 1-second windows (Kafka 4.x's
    --reporting-interval). The 30-second cell on the warmed cluster is the other bound: a
    cluster's first seconds are slower for every producer (the perf tool's own 5-second windows
    rose from 219k to 612k records/s over 30 s on a cluster kchaos had just used)."""
    dc.remove()
    topo = build_topology("kraft-combined", cluster=args.name, subnet=args.subnet)
    dc.up(topo, UpOptions(version, timing="fast"), say=lambda m: None)
    short = argparse.Namespace(**{**vars(args), "seconds": args.jvm_seconds, "kill": False})
    return perf_tool(short, topo.bootstrap_servers(), version, reporting_ms=1000)


@contextlib.contextmanager
def _runs_dir(keep: Path | None) -> Iterator[str]:
    """Where the kchaos runs go: `keep` when given (a run to look at again, its history,
    report and data logs), else a temporary directory removed at the end."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield str(keep)
        return
    with tempfile.TemporaryDirectory() as d:
        yield d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--concurrency", type=int, default=2, help="kchaos producers")
    ap.add_argument("--in-flight", type=int, default=2000, help="sends in flight per producer")
    ap.add_argument("--linger-ms", type=float, default=5.0, help="both producers' linger.ms")
    ap.add_argument("--keys", type=int, default=8, help="partitions of both topics")
    ap.add_argument("--version", default="3.9")
    ap.add_argument("--name", default=CLUSTER, help="Docker cluster name")
    ap.add_argument("--subnet", default=SUBNET)
    ap.add_argument("--kill", action="store_true", help="one partition leader killed, restarted")
    ap.add_argument(
        "--clients",
        default="librdkafka,java,jvm",
        help="kchaos's clients, one run each on a fresh cluster, in this order (comma-separated): "
        "librdkafka, java (every send through the harness's recorder), jvm (the Java client "
        "recording its own sends)",
    )
    ap.add_argument(
        "--jvm-seconds",
        type=float,
        default=None,
        help="the jvm client's time limit (default: --seconds, as the perf tool's)",
    )
    ap.add_argument(
        "--jvm-in-flight", type=int, default=100_000, help="the jvm client's sends in flight"
    )
    ap.add_argument(
        "--keep-runs",
        type=Path,
        default=None,
        help="keep each client's run directory under this directory (default: a temporary one)",
    )
    args = ap.parse_args()
    if args.jvm_seconds is None:
        args.jvm_seconds = args.seconds
    unknown = set(args.clients.split(",")) - set(CLIENT_ARGS)
    if unknown:
        raise SystemExit(f"unknown clients {sorted(unknown)}: choose from {list(CLIENT_ARGS)}")
    load_at_start = os.getloadavg()[0]
    dc = DockerCluster(client(), args.name)
    runs: dict[str, dict[str, float]] = {}
    try:
        with _runs_dir(args.keep_runs) as d:
            for name in args.clients.split(","):
                dc.remove()
                runs[name] = kchaos_run(args, Path(d) / name, name)
            # The perf tool runs on the cluster the last kchaos run kept, warmed up.
            kchaos = runs[name]
            topo = build_topology("kraft-combined", cluster=args.name, subnet=args.subnet)
            victim = (kchaos.get("fault") or {}).get("node")
            ids = {n.node_id: n.name for n in topo.brokers}
            perf = perf_tool(
                args, topo.bootstrap_servers(), str(kchaos["kafka_version"]), victim, ids
            )
            warm = None
            if "jvm" in runs and name == "jvm":
                warm = jvm_slots_warm(
                    args, (Path(d) / name / "latest").resolve(), topo.bootstrap_servers(),
                    str(kchaos["kafka_version"]),
                )  # fmt: skip
            cold = None
            if "jvm" in runs and str(kchaos["kafka_version"]).startswith("4."):
                cold = perf_cold(args, dc, str(kchaos["kafka_version"]))
    finally:
        dc.remove()
    best = max(runs, key=lambda n: runs[n]["ok_per_s"])
    kchaos = runs[best]
    ratio = kchaos["ok_per_s"] / perf["ok_per_s"] if perf["ok_per_s"] else 0.0
    ratios = {n: round(r["ok_per_s"] / perf["ok_per_s"], 3) if perf["ok_per_s"] else 0.0
              for n, r in runs.items()}  # fmt: skip
    steady = {n: round(r.get("steady_ok_per_s", 0) / perf["steady_ok_per_s"], 3)
              if perf.get("steady_ok_per_s") else 0.0 for n, r in runs.items()}  # fmt: skip
    result = {
        "command": " ".join(sys.argv),
        "seconds": args.seconds,
        "concurrency": args.concurrency,
        "in_flight": args.in_flight,
        "linger_ms": args.linger_ms,
        "record_size": RECORD_SIZE,
        "partitions": args.keys,
        "cpus": os.cpu_count(),
        # The client that recorded the most; every client's run under `clients`.
        "kchaos": kchaos,
        "best_client": best,
        "clients": runs,
        "ratios": ratios,
        "perf_tool": perf,
        "ratio": round(ratio, 3),
        "steady_ratios": steady,
        # The jvm client beside the perf tool started as it was: a fresh cluster, a fresh JVM,
        # the same seconds (its run is short: run_shape).
        "perf_tool_cold": cold,
        "jvm_cold_ratio": round(runs["jvm"]["ok_per_s"] / cold["ok_per_s"], 3)
        if cold and cold["ok_per_s"]
        else None,
        # The jvm client's recording slots alone on the warmed cluster, after the perf tool.
        "jvm_slots_warm": warm,
        "jvm_warm_ratio": round(warm["ok_per_s"] / perf["ok_per_s"], 3)
        if warm and perf["ok_per_s"]
        else None,
        "load_average_at_start": load_at_start,
        "goal_met": ratio >= 0.5 and kchaos["ok_per_s"] >= 5000,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, r in runs.items():
        print(
            f"kchaos on {name} (recorded, ok sends/s): {r['ok_per_s']:,.0f}  "
            f"ratio {ratios[name]:.2f}  check: {r['check']}  ({r['ok_sends']:,} ok sends in "
            f"{r['span_s']:g} s, {r['in_flight']} in flight per producer); second half "
            f"{r.get('steady_ok_per_s', 0):,.0f}/s, ratio {steady[name]:.2f}"
        )
    print(
        f"ProducerPerformance (records/s): {perf['ok_per_s']:,.0f}; after its first window "
        f"{perf['steady_ok_per_s']:,.0f}/s"
    )
    print(f"best ({best}) ratio: {ratio:.2f}  goal met: {result['goal_met']}")
    if warm:
        print(
            f"jvm recording slots alone on the warmed cluster after it, {args.jvm_seconds:g} s: "
            f"{warm['ok_per_s']:,.0f}/s (second half {warm['steady_ok_per_s']:,.0f}/s); ratio "
            f"{result['jvm_warm_ratio']:.2f}"
        )
    if cold:
        print(
            f"ProducerPerformance on a fresh cluster for {args.jvm_seconds:g} s (as the jvm "
            f"client's run): {cold['ok_per_s']:,.0f}/s; jvm ratio {result['jvm_cold_ratio']:.2f}"
        )
    if args.kill:
        for name, r in runs.items():
            print(f"-- kchaos on {name}")
            print_phases(r["fault"], perf["fault"])


def print_phases(kchaos: dict[str, object], perf: dict[str, object]) -> None:
    """The fault table: one row per tool."""
    head = ("", "node", "kill s", "restart s", "before/s", "during/s", "after/s",
            "1st ok after restart s", "longest ok gap s")  # fmt: skip
    keys = ("node", "kill_s", "restart_s", "before_ok_per_s", "during_ok_per_s",
            "after_ok_per_s", "first_ok_after_restart_s", "longest_ok_gap_s")  # fmt: skip
    print(" | ".join(head))
    for name, row in (("kchaos", kchaos), ("ProducerPerformance", perf)):
        print(" | ".join([name, *(f"{row.get(k)}" for k in keys)]))


if __name__ == "__main__":
    main()
