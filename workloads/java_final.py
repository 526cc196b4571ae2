"""The queue workload's final reads with Kafka's own Java client (`--client java`), run whole in
its JVM (workloads/java/KchaosFinal.java; docs/history.md, "Final reads").

Through the line protocol each poll's records crossed as JSON and were written again by the
harness's recorder: ~25,000 records/s, 309 s for a run's 7.9 M acknowledged sends. Here the
harness hands the JVM the acknowledged sends (one file of sorted int64 values per key,
workloads/readback.py write_wanted) and the deadline, and learns only counts: the JVM polls,
writes each poll's operations into the side file `final.ops` beside the recorded sends' (built
into history.parquet with them, history/build.py), tallies what it read, and answers `fstop` with
how many acknowledged sends it did not read and the first of them by name. The outcome is the
librdkafka reads' (workloads/queue_ops.py final_outcome).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from history.format import INFO, OK
from history.sidefiles import OP, TYPE_CODES, open_side
from workloads.api import SideRecorder
from workloads.java_client import consumer_conf
from workloads.java_host import JavaError, JavaGone, JavaHost, conf_args
from workloads.java_recorded import check_clock
from workloads.queue_ops import final_outcome, final_poll_records
from workloads.readback import (
    MAX_EXTENSION_S,
    PROGRESS_WINDOW_S,
    FinalTally,
    write_wanted,
)

FINAL_SIDE_FILE = "final.ops"
WANTED_FILE = "final.want"
# How long one poll waits for records, in the JVM.
POLL_MS = 500
# How long the JVM waits for the partitions' end offsets before it reads on without them (-1).
ENDS_MS = 5000
# How often the harness asks the JVM how far it got.
STATS_EVERY_S = 0.5
# Beyond the deadline's longest extension: the JVM's own end of the loop and its answer.
STOP_GRACE_S = 30.0


def final_args(
    wl: Any,
    side: SideRecorder,
    wanted_counts: list[int],
    process: int,
    started_ns: int,
    timeout: float,
) -> list[str]:
    """The `final` request's arguments: the reads' own settings (kchaos.*) and the consumer's
    configuration (the harness path's, workloads/java_client.py consumer_conf), polls of
    final_poll_records."""
    own = {
        "dir": str(side.side_dir),
        "topic": wl.topic,
        "keys": wl.keys,
        "t0_ns": side.t0_ns,
        "started_ns": started_ns,
        "timeout_ns": int(timeout * 1e9),
        "window_ns": int(PROGRESS_WINDOW_S * 1e9),
        "most_ns": int(MAX_EXTENSION_S * 1e9),
        "poll_ms": POLL_MS,
        "ends_ms": ENDS_MS,
        "process": process,
        "wanted": str(side.side_dir / WANTED_FILE),
        "wanted_counts": ",".join(map(str, wanted_counts)),
    }
    conf = consumer_conf(wl, f"kchaos-{wl.run_id}-final", subscribe=False)
    conf["max.poll.records"] = final_poll_records(sum(wanted_counts))
    return conf_args({**{f"kchaos.{k}": v for k, v in own.items()}, **conf})


def final_reads_java(
    wl: Any,
    host: JavaHost,
    new_process: Callable[[], int],
    side: SideRecorder,
    timeout: float,
) -> dict[str, Any]:
    """The final reads (workloads/queue.py final_reads) in the JVM: started, watched until
    they end or their longest deadline passed, stopped; their outcome."""
    started_ns = time.monotonic_ns()
    started = started_ns / 1e9
    check_clock(host)  # the JVM's lines are on the history's clock
    tally = FinalTally(wl.acked.wanted())
    side.side_dir.mkdir(parents=True, exist_ok=True)
    wanted_path = side.side_dir / WANTED_FILE
    counts = write_wanted(wanted_path, tally.wanted, wl.keys)
    first = new_process()
    h = host.handle()
    args = final_args(wl, side, counts, first, started_ns, timeout)
    last: dict[str, Any] = {}
    got: dict[str, Any] | None = None
    gone = None
    try:
        host.call("final", h, *args, timeout=60)
        hard = started + timeout + MAX_EXTENSION_S + STOP_GRACE_S
        while time.monotonic() < hard:
            last = host.call("fstats", h, timeout=15)
            if not last.get("running", True):
                break
            time.sleep(STATS_EVERY_S)
        got = host.call("fstop", h, timeout=POLL_MS / 1000 + STOP_GRACE_S + 15)
    except (JavaError, JavaGone) as exc:
        gone = str(exc)
    finally:
        host.forget(h)
        with contextlib.suppress(OSError):
            wanted_path.unlink()
    if got is None:
        # The JVM is gone or refused: what it wrote says what it read.
        got = {**last, **tally_side_file(side.side_dir / FINAL_SIDE_FILE, tally)}
    side.add_counts({"ok": int(got.get("ok") or 0), "info": int(got.get("info") or 0)})
    highest = int(got.get("highest") or first)
    p = first
    while p < highest:  # process ids the JVM took after an info are taken here too
        p = new_process()
    ends = {int(k): int(v) for k, v in (got.get("ends") or {}).items()}
    outcome = final_outcome(
        tally.acknowledged,
        int(got.get("unread", tally.acknowledged)),
        got.get("missing") or [],
        int(got.get("polls") or 0),
        started,
        ends or {k: -1 for k in range(wl.keys)},
    )
    why = gone or got.get("error")
    if why:
        outcome["error"] = why
    return outcome


def tally_side_file(path: Path, tally: FinalTally) -> dict[str, Any]:
    """The counts `fstop` would have given, from the final reads' side file as far as it was
    written (a JVM gone before answering): every whole poll's records, tallied."""
    polls = oks = infos = 0
    highest = None
    if path.exists():
        side = open_side(path)
        for start, stop in side.chunks(1 << 20):
            r = side.read(start, stop)
            op = r["kind"] == OP
            types = r["type"][op]
            oks += int(np.count_nonzero(types == TYPE_CODES[OK]))
            infos += int(np.count_nonzero(types == TYPE_CODES[INFO]))
            if op.any():
                top = int(r["c"][op].max())
                highest = top if highest is None else max(highest, top)
            # Every element left (open_side drops a poll cut short) is an ok poll's.
            keys, values = r["a"][~op], r["c"][~op]
            for k in np.unique(keys).tolist():
                tally.saw(int(k), values[keys == k])
        polls = oks
    out: dict[str, Any] = {
        "polls": polls,
        "ok": oks,
        "info": infos,
        "unread": tally.remaining,
        "missing": tally.missing(),
    }
    if highest is not None:
        out["highest"] = highest
    return out
