"""Data logs of a full-speed run, decoded and checked: seconds and peak RSS of each phase.

Synthesises what a `--client java --send-mode async --rate 0` run leaves (by default 6.2M ok
sends to 8 partitions, in batches of 500, every partition replicated on 3 brokers): real Kafka
segment files written by Kafka's own MemoryRecords builder (bench/java/KchaosSegmentWriter.java),
one copy per broker, and a history.parquet holding each send's op rows and element row and the
final reads' poll elements (op rows without `value_json`: the data-log checks read elements).
Then, each phase in a fresh child process (its peak RSS, and its JVM's):

- decode: clusters/data_logs.decode_segments over the 3 brokers (the collection's decode);
- read: the decoded rows of every broker (checkers/families/data_log/parse.read_data_logs) and
  the history's sends (data_log/sends.Sends.from_parquet);
- check: the data-log checks (data_log/check.check_data_logs) and the lease checker's
  attribution of every acknowledged write to the leader that appended it (attribution.attribute);
- with `--text`: the path this replaced, for one broker: DumpLogSegments text (dump_to_file)
  and its parse (read_data_logs over the text).

    .venv/bin/python -m bench.bench_data_logs [--sends 6200000] [--partitions 8] [--batch 500]
        [--version 4.4.0] [--text] [--keep DIR]

Writes bench/out/data_logs.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

OUT = Path(__file__).parent / "out"
TOPIC = "kchaos-queue"
BROKERS = ("n1", "n2", "n3")
ROW_GROUP = 1 << 20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sends", type=int, default=6_200_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--batch", type=int, default=500, help="records per batch")
    ap.add_argument("--version", default="4.4.0", help="the assembled Kafka release to use")
    ap.add_argument("--text", action="store_true", help="also time the DumpLogSegments path")
    ap.add_argument("--keep", type=Path, help="make the run directory here and keep it")
    ap.add_argument("--phase", help=argparse.SUPPRESS)  # a child: run one phase in DIR
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        _child(args)
    else:
        _parent(args)


def _parent(args: argparse.Namespace) -> None:
    from bench.segments import synth_segments
    from clusters.kafka_dist import load_dist

    dist = load_dist(args.version)
    if dist is None:
        sys.exit(f"Kafka {args.version} is not assembled: kchaos setup --version {args.version}")
    run = args.keep or Path(tempfile.mkdtemp(prefix="bench-data-logs-"))
    data = run / "data"
    per = args.sends // args.partitions
    sends = per * args.partitions
    t = time.monotonic()
    if not (data / "n1-raw").is_dir():
        data.mkdir(parents=True, exist_ok=True)
        synth_segments(dist, data / "n1-raw", TOPIC, args.partitions, per, args.batch)
        for b in BROKERS[1:]:
            shutil.copytree(data / "n1-raw", data / f"{b}-raw", dirs_exist_ok=True)
        write_history(run / "history.parquet", args.partitions, per)
    made = time.monotonic() - t
    raw_mb = sum(f.stat().st_size for f in data.glob("*-raw/*/*.log")) / 2**20
    rows: list[dict[str, Any]] = []
    phases = ["decode", "read", "check"] + (["text"] if args.text else [])
    for phase in phases:
        cmd = [sys.executable, "-m", "bench.bench_data_logs", "--phase", phase, "--dir", str(run)]
        cmd += ["--version", args.version]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"phase {phase} failed: {done.stderr[-2000:]}")
        rows.append({"phase": phase, **json.loads(done.stdout.strip().splitlines()[-1])})
    result = {
        "sends": sends,
        "records_on_disk": sends * len(BROKERS),
        "partitions": args.partitions,
        "batch": args.batch,
        "segments_mb": round(raw_mb, 1),
        "synthesis_s": round(made, 1),
        "kafka": args.version,
        "phases": rows,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "data_logs.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{sends:,} sends x {len(BROKERS)} brokers, {raw_mb:.0f} MB of segments, "
        f"Kafka {args.version}"
    )
    print(f"{'phase':<8} {'seconds':>8} {'python MB':>10} {'JVM MB':>8}  what")
    for r in rows:
        jvm = f"{r['jvm_mb']:.0f}" if r.get("jvm_mb") else "-"
        print(f"{r['phase']:<8} {r['seconds']:>8.1f} {r['python_mb']:>10.0f} {jvm:>8}  {r['what']}")
    if args.keep is None:
        shutil.rmtree(run, ignore_errors=True)


def write_history(path: Path, partitions: int, per: int) -> None:
    """Send k goes to partition k % partitions at offset k // partitions (its value the
    segments' there); then the final reads' polls, one element per record. Op rows: each
    send's invocation (2k) and ok completion (2k+1), without value_json."""
    from bench.segments import synth_value
    from history.columnar import SCHEMA

    n = per * partitions
    with pq.ParquetWriter(path, SCHEMA) as out:
        for lo in range(0, n, ROW_GROUP // 2):
            k = np.arange(lo, min(n, lo + ROW_GROUP // 2), dtype=np.int64)
            index = np.ravel(np.column_stack([2 * k, 2 * k + 1]))
            out.write_table(
                _table(
                    {
                        "row": _codes(np.zeros(len(index)), ["op"]),
                        "index": pa.array(index),
                        "invoke_index": pa.array(index - 1, mask=index % 2 == 0),
                        "type": _codes(index % 2, ["invoke", "ok"]),
                        "f": _codes(np.zeros(len(index)), ["send"]),
                        "process": _codes(np.repeat(k % 64, 2), [str(p) for p in range(64)]),
                        "time": pa.array(index * 100),
                    },
                    len(index),
                )
            )
        for kind in ("send", "poll"):
            for lo in range(0, n, ROW_GROUP):
                k = np.arange(lo, min(n, lo + ROW_GROUP), dtype=np.int64)
                p, o = k % partitions, k // partitions
                done = 2 * k + 1 if kind == "send" else 2 * n + k
                out.write_table(
                    _table(
                        {
                            "row": _codes(np.zeros(len(k)), ["elem"]),
                            "index": pa.array(done),
                            "invoke_index": pa.array(done - 1),
                            "type": _codes(np.zeros(len(k)), ["ok"]),
                            "f": _codes(np.zeros(len(k)), [kind]),
                            "process": _codes(k % 64, [str(q) for q in range(64)]),
                            "time": pa.array(done * 100),
                            "mop": pa.array(np.zeros(len(k), dtype=np.int32)),
                            "seq": pa.array(np.zeros(len(k), dtype=np.int32)),
                            "kind": _codes(np.zeros(len(k)), [kind]),
                            "key": pa.array(p),
                            "offset": pa.array(o),
                            "value": pa.array(synth_value(p, o)),  # type: ignore[arg-type]
                        },
                        len(k),
                    )
                )


def _codes(codes: np.ndarray, names: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(codes).astype(np.int32)), pa.array(names, pa.string())
    )


def _table(cols: dict[str, pa.Array], n: int) -> pa.Table:
    from history.columnar import SCHEMA

    arrays = [cols.get(f.name, pa.nulls(n, type=f.type)) for f in SCHEMA]
    return pa.Table.from_arrays(
        [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, SCHEMA, strict=True)],
        schema=SCHEMA,
    )


def _child(args: argparse.Namespace) -> None:
    run: Path = args.dir
    data = run / "data"
    t = time.monotonic()
    what = ""
    if args.phase == "decode":
        from clusters.data_logs import SEGMENTS_SOURCE, decode_segments
        from clusters.java_tool import compiled_tool
        from clusters.kafka_dist import load_dist

        dist = load_dist(args.version)
        assert dist is not None
        compiled_tool(dist, SEGMENTS_SOURCE)  # compiled once per release, not timed
        t = time.monotonic()
        failed = decode_segments(dist, {b: data / f"{b}-raw" for b in BROKERS}, data)
        assert not failed, failed
        what = "KchaosSegments, one JVM, a thread per broker on 2 cores"
    elif args.phase == "read":
        from checkers.families.data_log.parse import read_data_logs
        from checkers.families.data_log.sends import Sends

        logs = read_data_logs(data)
        sends = Sends.from_parquet(run / "history.parquet")
        n = sum(len(log.offsets) for log in logs.values())
        what = f"{n:,} records of {len(logs)} brokers; {len(sends.acked):,} acknowledged writes"
    elif args.phase == "check":
        from checkers.families.data_log.attribution import Leadership, attribute
        from checkers.families.data_log.check import DataLogRead, check_data_logs
        from checkers.families.data_log.parse import read_data_logs
        from checkers.families.data_log.sends import Sends
        from checkers.families.metadata_log.parse import Record

        logs = read_data_logs(data)
        sends = Sends.from_parquet(run / "history.parquet")
        record = Record("n1", 1, 0, 0, 0, "{}", False)
        parts = {int(p) for log in logs.values() for p in np.unique(log.partition)}
        leaders = {p: {0: Leadership(1, 0, record)} for p in parts}
        t = time.monotonic()
        result = check_data_logs(DataLogRead(logs), sends)
        checked = time.monotonic() - t
        placed = attribute(sends, logs, leaders, keep=set())
        attributed = time.monotonic() - t - checked
        assert not result.findings, result.findings[:3]
        assert placed.n_placed == len(np.unique(sends.op[sends.acked])), placed.notes
        what = (
            f"check_data_logs {checked:.1f} s ({len(result.findings)} findings), "
            f"attribute {attributed:.1f} s ({placed.n_placed:,} ops placed)"
        )
        t = time.monotonic() - checked - attributed  # the phase's seconds: these two
    elif args.phase == "text":
        from checkers.families.data_log.parse import read_data_logs
        from clusters.data_logs import dump_to_file
        from clusters.kafka_dist import load_dist

        dist = load_dist(args.version)
        assert dist is not None
        text_dir = Path(tempfile.mkdtemp(prefix="bench-text-", dir=run))
        dump_to_file(dist, data / "n1-raw", text_dir / "n1.txt")
        dumped = time.monotonic() - t
        mb = (text_dir / "n1.txt").stat().st_size / 2**20
        log = read_data_logs(text_dir)["n1"]
        what = (
            f"one broker: DumpLogSegments {dumped:.1f} s ({mb:.0f} MB of text), parse "
            f"{time.monotonic() - t - dumped:.1f} s ({len(log.offsets):,} records)"
        )
        shutil.rmtree(text_dir)
    seconds = time.monotonic() - t
    mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    jvm = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": round(seconds, 2),
                "python_mb": round(mine),
                "jvm_mb": round(jvm),
                "what": what,
            }
        )
    )


if __name__ == "__main__":
    main()
