"""A JVM-recorded pipelined history.jsonl of any size, for timing `kchaos check` on it.

The shape of a merged `--client java --send-mode async` run (docs/history.md, "Sends recorded
in the JVM"): SLOTS producers, each with IN_FLIGHT lanes, invoke sends to random keys and
complete them oldest first once their window is full, `ok` with the offset the key's log gave
them; one send in INFO_EVERY ends `info` (never appended) and its lane retires; the sends still
in flight at the end are reported then (the drain). Then the
final reads: one reader assigns every key and polls each key's log whole, READ_BATCH records a
poll. The history is valid: `kchaos check` finds nothing.

    python -m bench.jvm_jsonl OUT_DIR SENDS
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SLOTS = 4
IN_FLIGHT = 1000
KEYS = 16
STRIDE = 1_000_000_000
INFO_EVERY = 50_000
READ_BATCH = 5_000
READER = 10_000_000  # the final reads' process, far from every lane
STEP_NS = 2_000  # between two lines: ~10 s a 1M sends, as a JVM recording runs


def write_history(out_dir: Path, sends: int, seed: int = 1) -> int:
    """Writes out_dir/history.jsonl with `sends` sends; returns its op count."""
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    header = {
        "kchaos_history": 1, "started_wall": 1795312345.0, "run": "queue/bench-jvm",
        "consumer_after_abort": "rewind", "send_mode": "async", "in_flight": IN_FLIGHT,
        "idempotence": True, "client": "java", "send_recorder": "jvm",
        "jvm_sends": {"files": [f"slot{s}.jsonl" for s in range(SLOTS)]},
    }  # fmt: skip
    logs: list[list[int]] = [[] for _ in range(KEYS)]
    index = 0
    t = 0
    # Per slot: lanes (current process ids), in-flight (lane position, key, value) oldest first.
    lanes = [[s * IN_FLIGHT + j for j in range(IN_FLIGHT)] for s in range(SLOTS)]
    flight: list[list[tuple[int, int, int]]] = [[] for _ in range(SLOTS)]
    sent = [0] * SLOTS
    free = [list(range(IN_FLIGHT)) for _ in range(SLOTS)]
    completions = 0
    with open(out_dir / "history.jsonl", "w") as f:
        w = f.write
        w(json.dumps(header) + "\n")

        def line(typ: str, proc: int, body: str, producer: int, node: str = "n1") -> None:
            nonlocal index, t
            t += STEP_NS
            w(
                f'{{"index":{index},"time":{t},"type":"{typ}","f":"send","value":[{body}],'
                f'"process":{proc},"wall":{1795312345.0 + t / 1e9:.6f},"node":"{node}",'
                f'"producer":{producer}}}\n'
            )
            index += 1

        def complete(s: int) -> None:
            nonlocal completions
            pos, key, value = flight[s].pop(0)
            completions += 1
            if completions % INFO_EVERY == 0:
                line("info", lanes[s][pos], f'["send",{key},{value}]', s)
                lanes[s][pos] += SLOTS * IN_FLIGHT
            else:
                offset = len(logs[key])
                logs[key].append(value)
                line("ok", lanes[s][pos], f'["send",{key},[{offset},{value}]]', s)
            free[s].append(pos)

        for n in range(sends):
            s = n % SLOTS
            if not free[s]:
                complete(s)
            pos = free[s].pop()
            sent[s] += 1
            key, value = rng.randrange(KEYS), s * STRIDE + sent[s]
            line("invoke", lanes[s][pos], f'["send",{key},{value}]', s)
            flight[s].append((pos, key, value))
        for s in range(SLOTS):  # the drain at the end: every send reported
            while flight[s]:
                complete(s)

        def op(typ: str, f_: str, value: object) -> None:
            nonlocal index, t
            t += STEP_NS
            body = json.dumps(value, separators=(",", ":"))
            w(
                f'{{"index":{index},"time":{t},"type":"{typ}","f":"{f_}","value":{body},'
                f'"process":{READER},"wall":{1795312345.0 + t / 1e9:.6f},"node":"n1"}}\n'
            )
            index += 1

        keys = list(range(KEYS))
        op("invoke", "assign", keys)
        op("ok", "assign", keys)
        for k, log in enumerate(logs):
            for start in range(0, len(log), READ_BATCH):
                read = [[o, log[o]] for o in range(start, min(len(log), start + READ_BATCH))]
                op("invoke", "poll", [["poll"]])
                op("ok", "poll", [["poll", {str(k): read}]])
    (out_dir / "plan.json").write_text(json.dumps({"generator": {"value_stride": STRIDE}}))
    return index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("sends", type=int)
    args = ap.parse_args()
    ops = write_history(args.out_dir, args.sends)
    size = (args.out_dir / "history.jsonl").stat().st_size
    print(f"{args.out_dir}/history.jsonl: {ops} ops, {size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
