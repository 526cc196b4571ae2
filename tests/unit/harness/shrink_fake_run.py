"""A stand-in for `kchaos run --replay DIR --name N --results-dir R ...` in the shrink's tests:
writes a run directory as a run does (plan.json, run.json, results.json) and fails, with a
lost-write finding, exactly when the plan starts a kill; exit code as `kchaos run`'s. With
KCHAOS_LOCK set, run.json says whether someone held that file's flock while it ran."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    args = dict(zip(argv[1::2], argv[2::2], strict=False))
    plan = json.loads((Path(args["--replay"]) / "plan.json").read_text())
    fails = any(f["fault"] == "kill" and f["action"] == "start" for f in plan["faults"])
    run_dir = Path(args["--results-dir"]) / args["--name"] / f"{time.time_ns()}-{plan['seed']}"
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text(json.dumps(plan))
    findings = [{"kind": "lost-write", "explanation": "42 acknowledged, never read"}]
    results = {"status": "invalid" if fails else "valid", "findings": findings if fails else []}
    (run_dir / "results.json").write_text(json.dumps(results))
    run = {"cluster": args["--cluster"]}
    if os.environ.get("KCHAOS_LOCK"):
        with open(os.environ["KCHAOS_LOCK"]) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                run["lock_held"] = True
            else:
                run["lock_held"] = False
    (run_dir / "run.json").write_text(json.dumps(run))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
