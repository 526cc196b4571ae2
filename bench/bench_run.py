"""What recording costs: ops/s through the run interpreter vs a bare confluent-kafka loop.

Both drive the same cluster with the same clients (workloads.queue, same op mix, unlimited
rate, same concurrency) for the same time and count the same thing (ok completions); the
interpreter path also writes every invoke and completion to a history. Pairs alternate which
goes first, so a cluster that warms up (or a machine that gets busier) favours neither; the
ratio reported is the median of the pairs'. Also times Recorder.record alone. Prints a table
and writes ``bench/out/run.json``. Goal: recorded/bare >= 0.9.

    .venv/bin/python bench/bench_run.py [--seconds 15] [--concurrency 4] [--pairs 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from clusters.cluster import UpOptions
from clusters.docker_lifecycle import DockerCluster
from clusters.engine import client
from clusters.topology import build_topology
from harness.plan import build_plan, client_rng
from harness.run.interpreter import Run
from harness.run.recorder import Recorder
from harness.run.workers import ProcessIds
from harness.spec import RunSpec
from workloads.queue import QueueWorkload

OUT = Path(__file__).parent / "out"
CLUSTER, SUBNET = "run-bench", "10.213.60.0/24"


def bare(wl: QueueWorkload, seconds: float, concurrency: int) -> int:
    """The same clients applying the same kind of operations, recording nothing."""
    done = [0] * concurrency
    stop = threading.Event()

    def loop(slot: int) -> None:
        c = wl.client(10_000 + slot, client_rng(0, slot))
        c.open(c.setup_op)
        while not stop.is_set():
            done[slot] += c.apply(c.next_op()).type == "ok"
        c.close()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(done)


def recorded(plan, wl: QueueWorkload, seconds: float, concurrency: int, out: Path) -> int:
    """The interpreter's own worker loop, writing the history."""
    run = Run(plan, say=lambda m: None, show_progress=False)
    rec = Recorder(out / "history.jsonl", "bench/run")
    run.processes = ProcessIds(concurrency)
    threads = [threading.Thread(target=run._worker, args=(wl, rec, i)) for i in range(concurrency)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    run.stop.set()
    for t in threads:
        t.join()
    rec.close()
    # Completions of client processes (not assign/subscribe): the ops the bare loop counts.
    return sum(
        1
        for line in (out / "history.jsonl").open()
        if '"ok","f":"send"' in line or '"ok","f":"poll"' in line or '"ok","f":"txn"' in line
    )


def record_cost(n: int = 50_000) -> float:
    with tempfile.TemporaryDirectory() as d:
        rec = Recorder(Path(d) / "h.jsonl", "bench")
        value = [["send", 3, [123456, 2000123]]]
        t0 = time.perf_counter_ns()
        for i in range(n):
            rec.invoke("send", value, i % 4, "n1")
            rec.ok("send", value, i % 4, "n1")
        rec.close()
        return (time.perf_counter_ns() - t0) / (2 * n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=4, help="recorded/bare pairs, order alternating")
    ap.add_argument("--name", default=CLUSTER, help="Docker cluster name")
    ap.add_argument("--subnet", default=SUBNET)
    args = ap.parse_args()
    spec = RunSpec(concurrency=args.concurrency, rate=0, cluster=args.name, subnet=args.subnet)
    plan = build_plan(spec, 1)
    dc = DockerCluster(client(), args.name)
    dc.remove()
    topo = build_topology("kraft-combined", cluster=args.name, subnet=args.subnet)
    pairs: list[dict[str, float]] = []
    try:
        info = dc.up(topo, UpOptions("3.9", timing="fast"), say=lambda m: None)
        wl = QueueWorkload(plan.generator, info.topology, 1, "bench")
        wl.setup()
        bare(wl, 3, args.concurrency)  # warm up the brokers' JIT and the connections
        for i in range(args.pairs):
            got: dict[str, float] = {}
            order = ("recorded", "bare") if i % 2 == 0 else ("bare", "recorded")
            for which in order:
                if which == "bare":
                    got["bare"] = bare(wl, args.seconds, args.concurrency) / args.seconds
                else:
                    with tempfile.TemporaryDirectory() as d:
                        n = recorded(plan, wl, args.seconds, args.concurrency, Path(d))
                    got["recorded"] = n / args.seconds
            got["ratio"] = got["recorded"] / got["bare"] if got["bare"] else 0.0
            pairs.append({"first": order[0], **{k: round(v, 3) for k, v in got.items()}})
            print(f"pair {i + 1} ({order[0]} first): {pairs[-1]}")
        wl.close()
    finally:
        dc.remove()
    per_op = record_cost()
    result = {
        "seconds": args.seconds,
        "concurrency": args.concurrency,
        "bare_ops_per_s": round(statistics.median(p["bare"] for p in pairs), 1),
        "recorded_ops_per_s": round(statistics.median(p["recorded"] for p in pairs), 1),
        "ratio": round(statistics.median(p["ratio"] for p in pairs), 3),
        "ratio_recorded_first": [p["ratio"] for p in pairs if p["first"] == "recorded"],
        "ratio_bare_first": [p["ratio"] for p in pairs if p["first"] == "bare"],
        "record_ns_per_op": round(per_op),
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "run.json").write_text(json.dumps(result, indent=2) + "\n")
    for k, v in result.items():
        print(f"{k:>20}: {v}")


if __name__ == "__main__":
    main()
