"""Which fault units of a failing run its finding points at: what `kchaos shrink` tries first.

A fault unit is suspect when what it did in the original run (nemesis.json's timeline: each
step's effects, the nodes it hit, the partition it damaged) touches what the failing findings
name (their ``data``: brokers, holders, partitions, topics). The score of a unit is 2 when one
of its steps names a partition a finding names, 1 when it touched a node a finding names, 0
otherwise: a fault that touched nothing the finding is about is the first to try without.

Only the run's own evidence counts, never a fault's or a kind's name: a run without a
nemesis.json, or findings that name no node or partition, scores every unit 0, and the search
keeps the plan's order (docs/shrink.md, "What is tried first"). The scores are computed once,
from the original run, and kept in shrink.json (``suspects``), so a resumed shrink orders its
candidates as the first part did, whatever the run directory holds by then.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.plan import Plan

PARTITION, NODE, NOTHING = 2, 1, 0


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _partitions(value: Any) -> Iterable[tuple[str | None, int]]:
    """(topic or None, partition) of every mapping that names a partition by number."""
    if isinstance(value, dict):
        p = value.get("partition")
        if isinstance(p, int) and not isinstance(p, bool):
            topic = value.get("topic")
            yield (topic if isinstance(topic, str) else None, p)
        for v in value.values():
            yield from _partitions(v)
    elif isinstance(value, list):
        for v in value:
            yield from _partitions(v)


def _touched_nodes(value: dict[str, Any]) -> set[str]:
    """The nodes a step's completion says it acted on: its effects' and its targets."""
    nodes: set[str] = set()
    for effect in value.get("effects") or ():
        if isinstance(effect, dict):
            nodes |= {n for n in effect.get("nodes") or () if isinstance(n, str)}
    nodes |= {n for n in value.get("targets") or () if isinstance(n, str)}
    return nodes


def _same_partition(a: tuple[str | None, int], b: tuple[str | None, int]) -> bool:
    return a[1] == b[1] and (a[0] is None or b[0] is None or a[0] == b[0])


def unit_scores(run_dir: Path, plan: Plan, kinds: Iterable[str]) -> dict[str, int]:
    """Each fault step's score by its seed (a unit's score is its steps' highest), from the
    run's failing findings of ``kinds`` and its nemesis timeline; {} when there is no evidence."""
    try:
        results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
        timeline = json.loads((run_dir / "nemesis.json").read_text(encoding="utf-8"))["timeline"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return {}
    wanted = set(kinds)
    data = [
        f.get("data") or {}
        for f in results.get("findings") or ()
        if isinstance(f, dict)
        and f.get("kind") in wanted
        and f.get("tolerated") is None
        and not f.get("unknown")
    ]
    done = [e for e in timeline if isinstance(e, dict) and isinstance(e.get("value"), dict)]
    known = set().union(*(_touched_nodes(e["value"]) for e in done))
    nodes = {s for s in _strings(data) if s in known}
    partitions = list(_partitions(data))
    if not nodes and not partitions:
        return {}
    # A step's completions, by when it was planned and what it was (start-kill at 21 s).
    by_step: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for e in done:
        if isinstance(e.get("at_s"), int | float) and isinstance(e.get("f"), str):
            by_step.setdefault((float(e["at_s"]), e["f"]), []).append(e["value"])
    scores: dict[str, int] = {}
    for step in plan.faults:
        score = NOTHING
        for value in by_step.get((float(step.at_s), f"{step.action}-{step.fault}"), ()):
            if any(_same_partition(a, b) for a in _partitions(value) for b in partitions):
                score = PARTITION
            elif _touched_nodes(value) & nodes:
                score = max(score, NODE)
        key = str(step.seed)
        scores[key] = max(scores.get(key, NOTHING), score)
    return scores


def score(plan: Plan, unit: Iterable[int], scores: Mapping[str, int]) -> int:
    """A unit's score: the highest of its steps'."""
    return max((scores.get(str(plan.faults[i].seed), NOTHING) for i in unit), default=NOTHING)
