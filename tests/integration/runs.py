"""One `kchaos run` in-process, as the integration tests configure it: fast timing, quiet, on a
cluster of the test's own that is removed afterwards whatever happens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusters.docker_lifecycle import DockerCluster
from harness.plan import Plan, build_plan
from harness.run.interpreter import Run
from harness.run.outcome import RunResult
from harness.spec import RunSpec, validate


@dataclass
class Finished:
    result: RunResult
    plan: Plan
    # What the run itself left of its cluster (containers, networks), before the test cleaned up.
    left_behind: list[str]
    # What `inspect` returned, taken while a kept cluster was still up.
    inspected: Any = None


def quiet_run(
    docker_client: Any,
    name: str,
    subnet: str,
    seed: int,
    results: Path,
    inspect: Callable[[DockerCluster], Any] | None = None,
    plan_edit: Callable[[Plan], None] | None = None,
    **fields: Any,
) -> Finished:
    """Runs the spec (defaults: queue, 4 clients, nemesis every 8 s, fast timing) on the cluster
    `name`; `fields` may also hold `nemeses`, in-tree nemesis objects replacing the packages.
    `plan_edit` changes the drawn plan before it runs (a step's parameters, say), as editing a
    stored plan.json and replaying it would."""
    nemeses = fields.pop("nemeses", None)
    base: dict[str, Any] = {
        "workload": "queue",
        "concurrency": 4,
        "nemesis_interval": 8,
        "timing": "fast",
        "final_timeout": 90,
    }
    spec = validate(
        RunSpec.of(
            **{**base, **fields}, seed=seed, cluster=name, subnet=subnet, results_dir=str(results)
        )
    )
    plan = build_plan(spec, seed)
    if plan_edit is not None:
        plan_edit(plan)
    extra = {"nemeses": nemeses} if nemeses is not None else {}
    dc = DockerCluster(docker_client, name)
    dc.remove()  # leftovers of an interrupted earlier test run
    try:
        result = Run(plan, say=lambda m: None, show_progress=False, **extra).execute()
        inspected = inspect(dc) if inspect is not None else None
        left = [c.name for c in dc.containers()] + [n.name for n in dc.networks()]
    finally:
        dc.remove()
    return Finished(result, plan, left, inspected)
