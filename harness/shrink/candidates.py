"""Smaller plans from a plan: what `kchaos shrink` tries, as pure functions (docs/shrink.md).

Every candidate is a plan the plan's own validation accepts (``harness.plan.plan_from_dict``)
and strictly smaller than the plan it came from by ``size``, compared in this order: fault
units, family steps, time limit, concurrency, rate (0, unlimited, as infinite), seconds of
faults on, and breadth (how many nodes or links the faults' kinds and targets reach). So every
chain of accepted candidates ends.

What may change is read from the registries, never from a package's or family's name:

- **Fault units** (``fault_units``): a start and the stop with the same fault, kind, target,
  seed and parameters (the pair the interpreter undoes), or a start the run heals at its end;
  the steps of a choreographed sequence share ``FaultStep.group`` and are one unit, kept or
  dropped whole (their times scaled together).
- **Family steps**: the units each step family declares droppable (``Family.drop_units``);
  a family that declares none keeps its steps.
- **Narrower faults**: a kind's ``simpler`` kinds (its menu's), and targets narrowed along
  all, majority, minority, one where the menu allows that target for the kind.
- **The spec**: the time limit (never before the last step), concurrency and rate halved;
  the generator is derived again from the changed spec, as a new plan's is.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.plan import Plan, generator_params, plan_from_dict
from harness.shrink import suspects
from harness.spec import RunSpec, SpecError, spec_from_dict
from history import strict_json
from nemesis.api import FaultStep
from nemesis.items import targets_on
from nemesis.menu import Menu
from nemesis.registry import MENUS
from steps.registry import FAMILIES

# Targets from broad to narrow: what a target may be narrowed to (and the breadth it counts).
NARROWING = ("all", "majority", "minority", "one")
_BREADTH = {t: len(NARROWING) - i for i, t in enumerate(NARROWING)}
_D = RunSpec()

# How a candidate was made (shrink.json's ``move``): ddmin's keep and drop of fault units, then
# the greedy passes' moves, in the order a pass tries them.
KEEP, DROP = "keep-faults", "drop-faults"
STEPS, TIME, CONCURRENCY, RATE, DURATION, NARROW = (
    "drop-steps",
    "time-limit",
    "concurrency",
    "rate",
    "duration",
    "narrow",
)
PASS_MOVES = (STEPS, TIME, CONCURRENCY, RATE, DURATION, NARROW)


@dataclass(frozen=True, order=True)
class Size:
    """How big a plan is; compared field by field, in this order."""

    faults: int  # fault units
    steps: int  # family steps
    time_limit: float
    concurrency: int
    rate: float  # operations per second; 0 (unlimited) counts as infinite
    fault_seconds: float  # seconds some fault of the plan is on, summed over units
    breadth: int  # summed over fault steps: how far each one's kind and target reach

    def to_dict(self) -> dict[str, Any]:
        return {
            "faults": self.faults,
            "steps": self.steps,
            "time_limit": self.time_limit,
            "concurrency": self.concurrency,
            "rate": None if math.isinf(self.rate) else self.rate,
            "fault_seconds": self.fault_seconds,
            "breadth": self.breadth,
        }

    def __str__(self) -> str:
        rate = "unlimited" if math.isinf(self.rate) else f"{self.rate:g}/s"
        return (
            f"{self.faults} fault(s), {self.steps} step(s), {self.time_limit:g} s, "
            f"{self.concurrency} client(s) at {rate}, {self.fault_seconds:g} s of faults"
        )


@dataclass(frozen=True)
class Candidate:
    plan: Plan
    move: str  # one of KEEP, DROP, PASS_MOVES
    what: str  # what was made smaller, in words


def digest(plan: Plan) -> str:
    """What identifies a plan among the candidates (a resumed shrink finds its tries by it)."""
    return hashlib.sha256(plan.to_json().encode()).hexdigest()[:16]


def _key(step: FaultStep) -> tuple[Any, ...]:
    return (
        step.fault,
        step.kind,
        step.target,
        step.seed,
        strict_json.dumps(step.params, sort_keys=True),
    )


def fault_units(faults: Sequence[FaultStep]) -> list[list[int]]:
    """The plan's faults as units of step indices, in the order each unit first appears: a
    start with its stop, a start alone (healed at the run's end), or every step of a group."""
    units: list[list[int]] = []
    waiting: dict[tuple[Any, ...], list[int]] = {}
    groups: dict[str, int] = {}
    for i, step in enumerate(faults):
        if step.group is not None:
            if step.group not in groups:
                groups[step.group] = len(units)
                units.append([])
            units[groups[step.group]].append(i)
        elif step.action == "start":
            waiting.setdefault(_key(step), []).append(len(units))
            units.append([i])
        elif waiting.get(_key(step)):
            units[waiting[_key(step)].pop(0)].append(i)
        else:
            units.append([i])  # a stop without its start: kept as found
    return units


def _spec(plan: Plan, name: str) -> Any:
    value = plan.spec.get(name)
    return getattr(_D, name) if value is None else value


def _menu(step: FaultStep) -> Menu | None:
    return MENUS.get(step.fault)


def _kind_depth(menu: Menu, kind: str, seen: frozenset[str] = frozenset()) -> int:
    names = menu.kind_names()
    if kind not in names or kind in seen:
        return 0
    simpler = [k for k in menu.kind(kind).simpler if k in names]
    return 1 + max((_kind_depth(menu, k, seen | {kind}) for k in simpler), default=-1)


def _breadth(step: FaultStep) -> int:
    menu = _menu(step)
    if menu is None:
        return 1
    if menu.kind_is_target:
        return _BREADTH.get(step.kind, 1)
    return _BREADTH.get(step.target or "", 1) + _kind_depth(menu, step.kind)


def size(plan: Plan) -> Size:
    limit = float(_spec(plan, "time_limit"))
    seconds = 0.0
    for unit in fault_units(plan.faults):
        times = [plan.faults[i].at_s for i in unit]
        ends = any(plan.faults[i].action == "stop" for i in unit)
        seconds += (max(times) if ends else limit) - min(times)
    rate = float(_spec(plan, "rate"))
    return Size(
        faults=len(fault_units(plan.faults)),
        steps=sum(len(s) for s in plan.steps.values()),
        time_limit=limit,
        concurrency=int(_spec(plan, "concurrency")),
        rate=math.inf if rate == 0 else rate,
        fault_seconds=round(seconds, 3),
        breadth=sum(_breadth(s) for s in plan.faults),
    )


def is_valid(plan: Plan) -> bool:
    """Whether the plan's own validation (a replay's) accepts it."""
    try:
        plan_from_dict(json.loads(plan.to_json()))
    except SpecError:
        return False
    return True


def _describe(step: FaultStep) -> str:
    target = f"@{step.target}" if step.target and step.target != step.kind else ""
    return f"{step.fault}:{step.kind}{target}"


def describe_unit(faults: Sequence[FaultStep], unit: Sequence[int]) -> str:
    first = faults[unit[0]]
    if first.group is not None:
        return f"sequence {first.group} ({len(unit)} steps from {first.at_s:g} s)"
    return f"{_describe(first)} at {first.at_s:g} s"


def _with_faults(plan: Plan, faults: Iterable[FaultStep]) -> Plan:
    # Stable: steps of one moment keep their order (a start before its stop, a sequence's).
    return replace(plan, faults=sorted(faults, key=lambda s: s.at_s))


def _keeping(plan: Plan, units: Sequence[Sequence[int]]) -> Plan:
    kept = sorted(i for u in units for i in u)
    return replace(plan, faults=[plan.faults[i] for i in kept])


def _chunks(units: list[list[int]], n: int) -> list[list[list[int]]]:
    """``units`` in ``n`` consecutive chunks of nearly equal length."""
    n = max(1, min(n, len(units)))
    bounds = [round(i * len(units) / n) for i in range(n + 1)]
    return [units[bounds[i] : bounds[i + 1]] for i in range(n)]


def _admitted(plan: Plan, candidates: Iterable[Candidate]) -> list[Candidate]:
    """The candidates that are valid, strictly smaller than ``plan``, and each a new plan."""
    base = size(plan)
    seen = {digest(plan)}
    out = []
    for c in candidates:
        d = digest(c.plan)
        if d in seen or not size(c.plan) < base or not is_valid(c.plan):
            continue
        seen.add(d)
        out.append(c)
    return out


def _numbers(numbers: Sequence[int]) -> str:
    """1-based unit numbers in words: "3", "1-3", "2, 5-6"."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def ddmin_candidates(
    plan: Plan, n: int, scores: Mapping[str, int] | None = None
) -> list[Candidate]:
    """Delta debugging's tries at granularity ``n``: each of the ``n`` chunks of the fault units
    kept alone (when n > 1), then each dropped. At n = 1 that is the plan with no faults.

    With ``scores`` (harness/shrink/suspects.py: how much of what the finding names each unit
    touched) the units are chunked from the least suspect to the most, the chunks kept alone
    from the most suspect and dropped from the least, and at n = 2 the most suspect units
    alone are tried first: the candidates likeliest to keep the failure come first. Without
    scores, or with all equal, this is the plan's order."""
    units = fault_units(plan.faults)
    if not units:
        return []
    total = len(units)
    rank = [suspects.score(plan, u, scores or {}) for u in units]
    order = sorted(range(total), key=lambda i: (rank[i], i))
    chunks = [[order[i] for i in c] for c in _chunks(list(range(total)), n)]

    def span(chunk: Sequence[int]) -> str:
        which = f"unit{'s' if len(chunk) > 1 else ''} {_numbers([i + 1 for i in chunk])}"
        first = min(chunk)
        return f"{which} of {total} ({describe_unit(plan.faults, units[first])}...)"

    def keeping(chunk: Sequence[int]) -> Plan:
        return _keeping(plan, [units[i] for i in chunk])

    def suspicion(chunk: Sequence[int]) -> int:
        return max(rank[i] for i in chunk)

    out: list[Candidate] = []
    top = [i for i in range(total) if rank[i] == max(rank)]
    if n == 2 and len(top) < total:
        out.append(Candidate(keeping(top), KEEP, f"keep the suspect fault {span(top)}"))
    if len(chunks) > 1:
        # sorted() is stable: chunks of equal suspicion keep their order.
        for c in sorted(chunks, key=suspicion, reverse=True):
            out.append(Candidate(keeping(c), KEEP, f"keep fault {span(c)}"))
    for c in sorted(chunks, key=suspicion):
        rest = [i for i in range(total) if i not in set(c)]
        out.append(Candidate(keeping(rest), DROP, f"drop fault {span(c)}"))
    return _admitted(plan, out)


def _step_candidates(plan: Plan) -> Iterable[Candidate]:
    for family in FAMILIES:
        steps = list(plan.steps_of(family.key))
        for unit in family.drop_units(steps):
            if not unit:
                continue
            kept = [s for i, s in enumerate(steps) if i not in set(unit)]
            planned = {**plan.steps, family.key: kept}
            if not kept:
                del planned[family.key]
            first = steps[unit[0]]
            yield Candidate(
                replace(plan, steps=planned),
                STEPS,
                f"drop {family.key} step {first.step} at {first.at_s:g} s ({len(unit)} step(s))",
            )


def with_spec(plan: Plan, **changes: Any) -> Plan | None:
    """The plan with spec options changed and its generator derived again (None: the spec
    refuses the change)."""
    spec = {**plan.spec, **changes}
    try:
        derived = generator_params(spec_from_dict(spec, where="spec"))
    except SpecError:
        return None
    generator = {k: derived.get(k, v) for k, v in plan.generator.items()}
    return replace(plan, spec=spec, generator=generator)


def _last_at(plan: Plan) -> float:
    times = [s.at_s for s in plan.faults] + [s.at_s for v in plan.steps.values() for s in v]
    return max(times, default=0.0)


def _spec_candidates(plan: Plan, move: str) -> Iterable[Candidate]:
    limit = float(_spec(plan, "time_limit"))
    if move == TIME:
        last = _last_at(plan)
        interval = float(_spec(plan, "nemesis_interval"))
        # Shortest first: just past the last step; then time for its aftermath, or half.
        for new in (last + 1.0, max(limit / 2, last + interval)):
            new = math.ceil(new * 10) / 10
            if new < limit and (p := with_spec(plan, time_limit=max(new, 1.0))):
                yield Candidate(p, TIME, f"time limit {limit:g} s to {max(new, 1.0):g} s")
    elif move == CONCURRENCY:
        c = int(_spec(plan, "concurrency"))
        for new in sorted({1, c // 2}):
            if 1 <= new < c and (p := with_spec(plan, concurrency=new)):
                yield Candidate(p, CONCURRENCY, f"concurrency {c} to {new}")
    elif move == RATE:
        r = float(_spec(plan, "rate"))
        for new in sorted({1.0, max(1.0, round(r / 2, 1))}):
            if new < r and (p := with_spec(plan, rate=new)):
                yield Candidate(p, RATE, f"rate {r:g} to {new:g} per second")


def _duration_candidates(plan: Plan) -> Iterable[Candidate]:
    faults = list(plan.faults)
    for unit in fault_units(faults):
        times = [faults[i].at_s for i in unit]
        first, span = min(times), max(times) - min(times)
        if span <= 1.0:
            continue
        # The shortest first (a second), then half.
        for new in sorted({1.0, max(1.0, span / 2)}):
            factor = new / span
            changed = list(faults)
            for i in unit:
                at = round(first + (faults[i].at_s - first) * factor, 3)
                changed[i] = replace(faults[i], at_s=at)
            yield Candidate(
                _with_faults(plan, changed),
                DURATION,
                f"{describe_unit(faults, unit)}: {span:g} s to {new:g} s",
            )


def _narrower(step: FaultStep, topology: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(kind, target, params) that do what ``step`` does on fewer nodes or links."""
    menu = _menu(step)
    if menu is None or step.kind not in menu.kind_names():
        return []
    on = {k.name for k in menu.kinds_for(topology)}
    out: list[tuple[str, str | None, dict[str, Any]]] = []
    if menu.kind_is_target:
        # A step aimed elsewhere than its kind (a plan's named nodes) is hit where it is aimed.
        if step.kind in NARROWING and step.target in (None, step.kind):
            # The narrowest first: the search takes the first that still fails.
            for k in reversed(NARROWING[NARROWING.index(step.kind) + 1 :]):
                if k in on:
                    out.append((k, None if step.target is None else k, dict(step.params)))
        return out
    for k in menu.kind(step.kind).simpler:
        if k in on:
            reads = set(menu.kind(k).reads)
            params = {p: v for p, v in step.params.items() if p in reads}
            out.append((k, step.target if menu.takes_target(k) else None, params))
    if step.target in NARROWING:
        allowed = targets_on(step.fault, step.kind, topology)
        for t in reversed(NARROWING[NARROWING.index(step.target) + 1 :]):
            if t in allowed:
                out.append((step.kind, t, dict(step.params)))
    return out


def _narrow_candidates(plan: Plan) -> Iterable[Candidate]:
    faults = list(plan.faults)
    topology = str(_spec(plan, "topology"))
    for unit in fault_units(faults):
        first = faults[unit[0]]
        if first.group is not None:
            continue  # a sequence's roles are its own: kept as drawn
        for kind, target, params in _narrower(first, topology):
            changed = list(faults)
            for i in unit:
                changed[i] = replace(faults[i], kind=kind, target=target, params=params)
            now = _describe(changed[unit[0]])
            yield Candidate(
                replace(plan, faults=changed),
                NARROW,
                f"{describe_unit(faults, unit)} to {now}",
            )


def pass_candidates(plan: Plan, move: str) -> list[Candidate]:
    """The candidates of one greedy move (PASS_MOVES), valid and strictly smaller."""
    if move == STEPS:
        made: Iterable[Candidate] = _step_candidates(plan)
    elif move in (TIME, CONCURRENCY, RATE):
        made = _spec_candidates(plan, move)
    elif move == DURATION:
        made = _duration_candidates(plan)
    elif move == NARROW:
        made = _narrow_candidates(plan)
    else:
        raise ValueError(f"no move {move!r}")
    return _admitted(plan, made)


def all_candidates(plan: Plan) -> list[Candidate]:
    """Every candidate of one step of the search: ddmin's at granularity 2, then each move's."""
    out = ddmin_candidates(plan, 2)
    for move in PASS_MOVES:
        out += pass_candidates(plan, move)
    return out
