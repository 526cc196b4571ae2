"""Small generated run directories: a queue history with a partition fault, observer samples
whose leader moves during it, and optionally a lost write; spec.json and run.json beside it."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.unit.checkers.histories import H


def make_run(
    directory: Path,
    seed: int = 0,
    lose_write: bool = False,
    workload: str = "queue",
    nemesis: str = "partition",
    version: str = "3.9.2",
    date: str = "20261122T014500",
) -> Path:
    rng = random.Random(seed)
    h = H()
    offsets = {0: 0, 1: 0}
    read_to: dict[tuple[int, int], int] = {}  # (poller, key) -> next offset it reads
    leader, epoch = 1, 2
    for step in range(60):
        if step == 20:
            h.nemesis(
                "start-partition",
                {"kind": "isolate-active-controller", "grudge": {"n1": ["n2", "n3"]}},
            )
            leader, epoch = 2, 3
        if step == 40:
            h.nemesis("stop-partition", {"healed": True})
        if step % 5 == 0:
            for n in (1, 2, 3):
                state = "leader" if n == leader else "follower"
                h.observe(f"n{n}", raft={"state": state, "leader": leader, "epoch": epoch,
                                         "high_watermark": 10 + step})  # fmt: skip
        key = rng.choice([0, 1])
        if step % 3 == 2:
            poller = rng.choice([2, 3])
            start = read_to.get((poller, key), 0)
            seen = [(o, v) for o, v in _sent(h).get(key, []) if o >= start]
            if seen:
                read_to[poller, key] = seen[-1][0] + 1
            h.poll(poller, {key: seen} if seen else {})
        else:
            h.send(rng.choice([0, 1]), key, step + 1, offsets[key])
            offsets[key] += 1
    if lose_write:
        # Acknowledged at offset 0 of key 5, then a poll reads past it without it.
        h.send(0, 5, 1000, 0).send(0, 5, 1001, 1).poll(2, {5: [(1, 1001)]})
    directory.mkdir(parents=True, exist_ok=True)
    h.write(directory)
    (directory / "spec.json").write_text(
        json.dumps({"workload": workload, "nemesis": [nemesis], "version": version, "seed": seed})
    )
    (directory / "run.json").write_text(json.dumps({"seed": seed, "started": date}))
    return directory


def _sent(h: H) -> dict[int, list[tuple[int, int]]]:
    """Every acknowledged send so far, per key, in offset order: what a poll from 0 reads."""
    out: dict[int, list[tuple[int, int]]] = {}
    for op in h.lines:
        if op["type"] == "ok" and op["f"] == "send":
            _, k, (o, v) = op["value"][0]
            out.setdefault(k, []).append((o, v))
    return out
