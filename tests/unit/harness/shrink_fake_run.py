"""A stand-in for `kchaos run --replay DIR --name N --results-dir R ...` in the shrink's tests:
writes a run directory as a run does (plan.json, run.json, results.json) and fails, with a
lost-write finding, exactly when the plan starts a kill; exit code as `kchaos run`'s."""

from __future__ import annotations

import json
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
    (run_dir / "run.json").write_text(json.dumps({"cluster": args["--cluster"]}))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
