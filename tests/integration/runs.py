"""One `kchaos run` in-process, as the integration tests configure it: fast timing, quiet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.interpreter import Run, RunResult
from harness.plan import Plan, build_plan
from harness.spec import RunSpec, validate


def quiet_run(
    name: str, subnet: str, seed: int, results: Path, **fields: Any
) -> tuple[RunResult, Plan]:
    """Runs the spec (defaults: queue, 4 clients, nemesis every 8 s, fast timing) on the cluster
    `name`; `fields` may also hold `nemeses`, in-tree nemesis objects replacing the packages."""
    nemeses = fields.pop("nemeses", None)
    base: dict[str, Any] = {
        "workload": "queue",
        "concurrency": 4,
        "nemesis_interval": 8,
        "timing": "fast",
        "final_timeout": 90,
    }
    spec = validate(
        RunSpec(
            **{**base, **fields},
            seed=seed,
            cluster=name,
            subnet=subnet,
            results_dir=str(results),
        )
    )
    plan = build_plan(spec, seed)
    extra = {"nemeses": nemeses} if nemeses is not None else {}
    return Run(plan, say=lambda m: None, show_progress=False, **extra).execute(), plan
