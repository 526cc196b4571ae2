"""Every liveness rule over one run, and the verdict's liveness block (results.json
`liveness`): its status, whether it fails the run, the recovery times, the bounds.

The status: `live` when some rule was judged and none found anything, `hang` when a rule
found something, `not judged` when nothing could be (no client ops, no faults and no logs).
A finding is tolerated (reported, the run's safety verdict unchanged) unless the run option
`--liveness fail` (plan.json spec `liveness`) says liveness findings fail the run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from checkers.core.findings import Finding
from checkers.families.liveness.assignment import unassigned_groups
from checkers.families.liveness.bounds import Bounds
from checkers.families.liveness.fatal import fatal_findings, fatal_lines
from checkers.families.liveness.health import Roles, disruptions, stretches
from checkers.families.liveness.offline import offline_partitions
from checkers.families.liveness.progress import (
    TypeOps,
    last_heal,
    no_progress,
    recovery,
    slow_recovery,
)
from checkers.families.liveness.registration import after_heal, with_log_evidence
from checkers.families.metadata_log.liveness import Nodes, samples_of
from checkers.families.metadata_log.parse import Record
from checkers.scan.fault_windows import TIME, WALL, fault_windows
from history.format import MIGRATION, PLAN_JSON, UPGRADE

LIVE, HANG, NOT_JUDGED = "live", "hang", "not judged"
REPORT, FAIL = "report", "fail"
LIVENESS_OPTIONS = (REPORT, FAIL)  # harness/spec.py LIVENESS: the first is the default
TOLERATED = (
    "a liveness finding (docs/checkers.md, Liveness): Kafka kept its safety but did not stay "
    "available where it promised to; reported in results.json's liveness block, and a failure "
    "with the run option --liveness fail (plan.json spec liveness)"
)
KINDS = (
    "no-progress",
    "slow-recovery",
    "broker-fenced-after-heal",
    "controller-unregistered",
    "partition-offline-live-isr",
    "group-unassigned",
    "fatal-log-line",
)


@dataclass(frozen=True)
class Options:
    fail: bool = False
    recovery_bound: float | None = None


def read_options(run_dir: str | Path) -> Options:
    """plan.json's spec `liveness` (report unless it says fail) and `recovery_bound`."""
    try:
        plan = json.loads((Path(run_dir) / PLAN_JSON).read_text())
    except (OSError, ValueError):
        return Options()
    spec = plan.get("spec") if isinstance(plan, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    bound = spec.get("recovery_bound")
    ok = isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound > 0
    return Options(spec.get("liveness") == FAIL, float(bound) if ok else None)


@dataclass
class LivenessInputs:
    """What the rules read: `fault_rows`, the op rows (every column) of the nemesis, upgrade,
    migration and observer processes; `ops`, the clients' ops per type (progress.client_ops);
    `committed`: the committed metadata records (None: the run has no metadata logs)."""

    cluster: dict[str, Any]
    header: dict[str, Any]
    fault_rows: list[dict[str, Any]]
    ops: dict[str, TypeOps]
    committed: list[Record] | None = None
    run_dir: Path | None = None
    options: Options = field(default_factory=Options)
    # Op rows (every column) of the subscribe, poll and txn ops, for the group rule; None: the
    # history records no op fields (no rebalance events to read).
    group_rows: Iterable[dict[str, Any]] | None = None


@dataclass
class LivenessResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)
    block: dict[str, Any] = field(default_factory=dict)


def check_liveness(given: LivenessInputs) -> LivenessResult:
    out = LivenessResult()
    bounds = Bounds.of(given.cluster)
    roles = Roles.of(given.cluster, given.header)
    names = sorted(roles.nodes)
    timed = fault_windows(given.fault_rows, names, TIME)
    healed = last_heal(timed) if timed.walls else None
    recovered: dict[str, Any] = {}
    if given.ops and timed.walls and roles.brokers:
        hi = max(
            float(np.max(np.where(np.isinf(o.done), o.invoked, o.done))) for o in given.ops.values()
        )
        spans = stretches(disruptions(timed, roles, bounds.recovery_s), roles, 0.0, hi)
        out.findings += no_progress(given.ops, spans, bounds.progress_s, bounds.says())
        out.judged.append("no-progress")
        recovered = recovery(given.ops, timed)
        out.findings += slow_recovery(given.ops, timed, given.options.recovery_bound)
        if recovered:
            out.judged.append("recovery")
        if given.group_rows is not None:
            found, judged = unassigned_groups(given.group_rows, spans, bounds.group_s)
            out.findings += found
            if judged:
                out.judged.append("group-assignment")
    elif given.ops and not roles.brokers:
        out.notes.append("liveness: cluster.json names no brokers: progress not judged")
    walled = fault_windows(given.fault_rows, names, WALL)
    nodes = Nodes.of(given.cluster)
    walls = [r["wall"] for r in given.fault_rows if r.get("wall") is not None]
    history_end = max(walls, default=-math.inf)
    if given.committed and walled.walls and nodes.ids:
        samples = samples_of(given.fault_rows) or []
        wall_heal = last_heal(walled)
        steps = any(op.process in (UPGRADE, MIGRATION) for op, _ in walled.others)
        registered = after_heal(
            given.committed,
            nodes,
            samples,
            wall_heal[0] if wall_heal is not None else None,
            history_end,
            bounds.after_heal_s,
            steps,
        )
        out.findings += with_log_evidence(registered.findings, given.run_dir)
        out.notes += registered.notes
        if registered.judged:
            out.judged.append("after-heal")
        offline, _seen = offline_partitions(given.committed, history_end, bounds.offline_s)
        out.findings += offline
        out.judged.append("offline-partitions")
    if given.run_dir is not None and walled.walls:
        lines = fatal_lines(given.run_dir, names)
        found, notes = fatal_findings(lines, walled)
        out.findings += found
        out.notes += notes
        if (given.run_dir / "logs").is_dir():
            out.judged.append("fatal-log-lines")
    if not given.options.fail:
        out.findings = [replace(f, tolerated=TOLERATED) for f in out.findings]
    out.block = _block(out, bounds, given.options, healed, recovered)
    return out


def _block(
    out: LivenessResult,
    bounds: Bounds,
    options: Options,
    healed: tuple[float, int] | None,
    recovered: dict[str, Any],
) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for f in out.findings:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    status = HANG if out.findings else LIVE if out.judged else NOT_JUDGED
    return {
        "status": status,
        "fails_run": options.fail,
        "counts": dict(sorted(counts.items())),
        "judged": out.judged,
        "recovery": {
            "last_heal_s": round(healed[0], 3) if healed is not None else None,
            "last_heal_op": healed[1] if healed is not None else None,
            "by_type": recovered,
            "bound_s": options.recovery_bound,
        },
        "bounds": bounds.to_dict(),
    }
