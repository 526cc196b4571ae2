"""The history phase of a JVM-recorded run, without a cluster: side files of SENDS sends built
into history.parquet (history/build.py), seconds and peak RSS.

Writes what a `--client java --send-mode async --rate 0` run leaves at its end
(docs/history.md, "Sends recorded in the JVM", "Final reads"), generated with numpy: SLOTS slot
files of sends (IN_FLIGHT lanes each, round robin, each send completing before its lane's next
one; one in FAIL_EVERY fails with an error text, the rest ok, offsets per key), the final reads'
file (every ok send read back, POLL_RECORDS a poll, one key's records together), and a small
recorder history.jsonl (the observer's samples every 0.2 s). Then times `build_run` on them in a
child process (its peak RSS is the build's alone) and, with `--reference N`, today's path it
replaced on N sends of the same shape (side files as JSONL, history/merge.py then
history/stream.py convert) for comparison.

    .venv/bin/python -m bench.bench_history [--sends 6200000] [--dir /tmp/bh] [--reference 200000]
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

from history.format import JSONL_NAME, JVM_SENDS_DIR, PARQUET_NAME
from history.sidefiles import (
    ELEMENT,
    OP,
    POLLS_TAG,
    SENDS_TAG,
    SideWriter,
    poll_records,
    send_records,
)

SLOTS = 2
IN_FLIGHT = 100_000
KEYS = 8
STRIDE = 1_000_000_000
FAIL_EVERY = 100_000
POLL_RECORDS = 20_000
SECONDS = 30.0
WALL0_US = 1_795_312_345_000_000
OUT = Path(__file__).parent / "out"


def write_run(run_dir: Path, sends: int, seed: int = 1) -> dict[str, int]:
    """The run directory as a JVM-recorded run leaves it before its history is built."""
    rng = np.random.default_rng(seed)
    side = run_dir / JVM_SENDS_DIR
    side.mkdir(parents=True)
    dt = SECONDS * 1e9 / sends  # between two invocations (of any slot)
    keys_all, values_all, offsets_all = [], [], []
    per_key = np.zeros(KEYS, dtype=np.int64)
    for s in range(SLOTS):
        n = sends // SLOTS + (1 if s < sends % SLOTS else 0)
        k = np.arange(n, dtype=np.int64)
        invoke_t = ((k * SLOTS + s) * dt).astype(np.int64)
        # A lane's send completes before the lane's next invocation, IN_FLIGHT sends later.
        done_t = invoke_t + int(dt * SLOTS * IN_FLIGHT * 0.6)
        key = rng.integers(0, KEYS, n).astype(np.int32)
        value = s * STRIDE + k + 1
        typ = np.where((k + 1) % FAIL_EVERY == 0, 2, 1).astype(np.uint8)
        ok = typ == 1
        offset = np.full(n, -1, dtype=np.int64)
        for kk in range(KEYS):  # offsets per key in completion order (here: send order)
            mine = np.flatnonzero(ok & (key == kk))
            offset[mine] = per_key[kk] + np.arange(len(mine))
            per_key[kk] += len(mine)
        recs = send_records(2 * n)
        times = np.concatenate([invoke_t, done_t])
        order = np.argsort(times, kind="stable")
        inv = order < n
        src = np.where(inv, order, order - n)
        recs["time"] = times[order]
        recs["wall_us"] = WALL0_US + recs["time"] // 1000
        recs["process"] = s * IN_FLIGHT + src % IN_FLIGHT
        recs["producer"] = s
        recs["key"] = key[src]
        recs["value"] = value[src]
        recs["type"] = np.where(inv, 0, typ[src])
        recs["offset"] = np.where(inv, -1, offset[src])
        w = SideWriter(side / f"slot{s}.ops", SENDS_TAG)
        n1 = w.string("n1")
        err = w.string("abortable: RecordTooLargeException: a refusal")
        recs["node"] = n1
        recs["error"] = np.where(recs["type"] == 2, err, -1)
        w.write(recs)
        w.close()
        keys_all.append(key[ok])
        values_all.append(value[ok])
        offsets_all.append(offset[ok])
    # The final reads: every ok send, by key and offset, POLL_RECORDS a poll.
    key = np.concatenate(keys_all)
    offset = np.concatenate(offsets_all)
    value = np.concatenate(values_all)
    order = np.lexsort((offset, key))
    key, offset, value = key[order], offset[order], value[order]
    polls = (len(key) + POLL_RECORDS - 1) // POLL_RECORDS
    recs = poll_records(len(key) + 2 * polls)
    t = int(SECONDS * 1e9) + 5_000_000_000
    pos = 0
    for p in range(polls):
        a, b = p * POLL_RECORDS, min(len(key), (p + 1) * POLL_RECORDS)
        recs[pos]["kind"], recs[pos]["type"] = OP, 0
        recs[pos]["a"], recs[pos]["c"] = t, 10_000_000
        recs[pos]["b"] = WALL0_US + t // 1000
        pos += 1
        m = b - a
        el = recs[pos : pos + m]
        el["kind"], el["a"], el["b"], el["c"] = ELEMENT, key[a:b], offset[a:b], value[a:b]
        pos += m
        t += 10_000_000
        recs[pos]["kind"], recs[pos]["type"] = OP, 1
        recs[pos]["a"], recs[pos]["c"] = t, 10_000_000
        recs[pos]["b"] = WALL0_US + t // 1000
        pos += 1
    w = SideWriter(side / "final.ops", POLLS_TAG)
    w.write(recs)
    w.close()
    _write_main(run_dir / JSONL_NAME, t)
    return {"sends": sends, "read_back": len(key), "polls": polls}


def _write_main(path: Path, end: int) -> None:
    header = {
        "kchaos_history": 1, "started_wall": WALL0_US / 1e6, "run": "queue/bench-history",
        "consumer_after_abort": "rewind", "send_mode": "async", "in_flight": IN_FLIGHT,
        "idempotence": True, "client": "java", "send_recorder": "jvm",
    }  # fmt: skip
    lines = [json.dumps(header)]
    i = 0
    for t in range(0, end, 200_000_000):
        for typ in ("invoke", "ok"):
            op = {
                "index": i, "type": typ, "f": "observe",
                "value": None if typ == "invoke" else {}, "process": "observer",
                "time": t + (typ == "ok"), "wall": (WALL0_US + t // 1000) / 1e6, "node": "n1",
            }  # fmt: skip
            lines.append(json.dumps(op, separators=(",", ":")))
            i += 1
    path.write_text("\n".join(lines) + "\n")


def _child_build(run_dir: str) -> None:
    from history.build import build_run

    started = time.perf_counter()
    done = build_run(run_dir)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert done is not None
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak, "ops": done.ops}))


def _child_reference(run_dir: str) -> None:
    """Today's path: the binary side files rewritten as JSONL lines first (not timed), then
    merge_run and convert, timed."""
    from history.merge import merge_run
    from history.stream import convert

    run = Path(run_dir)
    started = time.perf_counter()
    merge_run(run)
    merged = time.perf_counter()
    convert(run / JSONL_NAME, run / PARQUET_NAME)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "merge_s": merged - started, "peak_rss_mb": peak}))


def to_jsonl_sides(run_dir: Path) -> None:
    """The binary side files as the JVM wrote them before (JSON lines, history/merge.py)."""
    from history.build import build_run
    from history.export import jsonl_lines

    scratch = run_dir.with_name(run_dir.name + "-built")
    shutil.copytree(run_dir, scratch)
    build_run(scratch)
    side = run_dir / JVM_SENDS_DIR
    lines = b"".join(jsonl_lines(scratch / PARQUET_NAME)).split(b"\n")[1:-1]
    by: dict[str, list[bytes]] = {}
    for line in lines:
        op = json.loads(line)
        if op["process"] == "observer":
            continue
        name = "final.jsonl" if op["f"] == "poll" else f"slot{op['producer']}.jsonl"
        op.pop("index")
        by.setdefault(name, []).append(
            json.dumps({"time": op.pop("time"), **op}, separators=(",", ":")).encode()
        )
    for p in side.glob("*.ops"):
        p.unlink()
    for p in side.glob("*.strings"):
        p.unlink()
    for name, ls in by.items():
        (side / name).write_bytes(b"\n".join(ls) + b"\n")
    shutil.rmtree(scratch)


def _run_child(fn: str, run_dir: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", f"from bench.bench_history import {fn}; {fn}({str(run_dir)!r})"],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sends", type=int, default=6_200_000)
    ap.add_argument("--dir", type=Path, help="where the run directory goes (kept)")
    ap.add_argument("--reference", type=int, default=0, help="sends for today's path (0: skip)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        base = args.dir or Path(tmp)
        run = base / f"run-{args.sends}"
        shutil.rmtree(run, ignore_errors=True)
        t = time.perf_counter()
        shape = write_run(run, args.sends)
        made = time.perf_counter() - t
        size = sum(p.stat().st_size for p in (run / JVM_SENDS_DIR).iterdir())
        got = _run_child("_child_build", run)
        parquet = (run / PARQUET_NAME).stat().st_size
        sizes = {"side_files_mb": round(size / 1e6), "parquet_mb": round(parquet / 1e6)}
        rows.append({"path": "build", **shape, **sizes, "generated_s": round(made, 1), **got})
        if args.reference:
            ref = base / f"ref-{args.reference}"
            shutil.rmtree(ref, ignore_errors=True)
            shape = write_run(ref, args.reference)
            built = _run_child("_child_build", ref)
            shutil.rmtree(ref)
            write_run(ref, args.reference)
            to_jsonl_sides(ref)
            old = _run_child("_child_reference", ref)
            rows.append({"path": "build", **shape, **built})
            rows.append({"path": "merge+convert (today's)", **shape, **old})
    OUT.mkdir(exist_ok=True)
    (OUT / "history.json").write_text(json.dumps({"rows": rows}, indent=2))
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
