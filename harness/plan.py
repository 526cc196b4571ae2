"""The plan: everything a run decides in advance, derived from the spec and one seed.

Deciding and doing stay apart (as in Jepsen's generators): the plan is pure data written to
`plan.json` before the cluster starts, and the interpreter only carries it out. The same spec and
seed give byte-identical plan files; a replay runs a stored plan unchanged. Choices that depend on
the live cluster (who is the active controller?) are not in the plan: each fault step carries a
seed the nemesis resolves its targets with at fault time, and the history records the outcome.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from clusters.topology import build_topology
from harness.spec import MAX_SEED, RunSpec, SpecError, spec_from_dict
from history.format import PLAN_JSON
from nemesis import choreo
from nemesis.api import FaultStep
from nemesis.choreo import CHOREO
from nemesis.client import needs_networks, needs_processes
from nemesis.errors import NemesisError
from nemesis.items import Item, parse_items
from nemesis.registry import MENUS, build
from steps.recorded import PlannedStep
from steps.registry import FAMILIES
from workloads.client_procs import CLIENT_NETS, CLIENT_PROCS
from workloads.registry import WORKLOADS

PLAN_VERSION = 1
PLAN_NAME = PLAN_JSON


@dataclass
class Plan:
    seed: int
    spec: dict[str, Any]
    generator: dict[str, Any]
    faults: list[FaultStep] = field(default_factory=list)
    # Each step family's steps by its plan.json key (steps/registry.py), only the families that
    # have steps: the migration's on topology migration, the upgrade's when the spec asks.
    steps: dict[str, list[PlannedStep]] = field(default_factory=dict)
    # What the plan tells before a run and is not part of plan.json: the items of --nemesis
    # the time limit left without a fault window (a stored plan, replayed, tells nothing).
    notes: list[str] = field(default_factory=list, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "kchaos_plan": PLAN_VERSION,
            "seed": self.seed,
            "spec": self.spec,
            "generator": self.generator,
            "faults": [_fault_dict(s) for s in self.faults],
        }
        for key, steps in self.steps.items():
            if steps:
                # Only present when the family has steps: every other plan file stays as it was.
                out[key] = [asdict(s) for s in steps]  # type: ignore[call-overload]
        return out

    def steps_of(self, key: str) -> list[PlannedStep]:
        """The steps of the family ``key``; empty when the plan has none."""
        return self.steps.get(key, [])

    def to_json(self) -> str:
        # sort_keys and a fixed layout: the file is compared byte for byte across runs.
        # allow_nan=False: strict JSON (every number was checked finite before it got here).
        return json.dumps(self.to_dict(), sort_keys=True, indent=2, allow_nan=False) + "\n"

    def run_spec(self) -> RunSpec:
        return spec_from_dict(self.spec, where=PLAN_NAME)


def _fault_dict(step: FaultStep) -> dict[str, Any]:
    out = asdict(step)
    if out["group"] is None:
        del out["group"]  # every plan without sequences stays byte for byte the same
    return out


def new_seed() -> int:
    return random.SystemRandom().randrange(2**31)


# How `client_rng` seeds a process's stream, as the plan states it.
CLIENT_RNG = "random.Random('kchaos/<seed>/client/<process>')"


def client_rng(seed: int, process: int) -> random.Random:
    """The random stream of one client process: fixed by the seed, whatever the thread timing."""
    return random.Random(client_rng_prefix(seed) + str(process))


def client_rng_prefix(seed: int) -> str:
    """client_rng's seed string without the process: what a producer recording its own sends
    in the JVM seeds Python's generator with (workloads/java/PyRandom.java)."""
    return f"kchaos/{seed}/client/"


def fault_windows(spec: RunSpec) -> list[tuple[float, float | None]]:
    """When faults are on: after a quiet period (``--nemesis-quiet``, else the interval), on for
    the interval, then quiet again, until the time limit. A window whose stop would reach the
    limit has none: the interpreter heals at the end.
    """
    interval = spec.nemesis_interval
    quiet = spec.quiet_s
    windows: list[tuple[float, float | None]] = []
    t = quiet
    # Compare the times as written to plan.json (rounded), or a step could land on the limit.
    while round(t, 3) < spec.time_limit:
        stop = round(t + interval, 3)
        windows.append((round(t, 3), stop if stop < spec.time_limit else None))
        # interval + interval is 2 * interval exactly: every plan before the option is the same.
        t += interval + quiet
    return windows


def fault_turns(spec: RunSpec, rng: random.Random) -> tuple[list[FaultStep], list[Item]]:
    """The fault steps, and the item of ``--nemesis`` each window was given to.

    One fault at a time, and every item has its turn before any has a second: each window draws
    one of the items whose turn has not come yet in this round, in the order of their names,
    then the item's menu draws the fault. With one item that is the one draw a window always
    made, so a plan of one package is the same as before items could name kinds.
    """
    steps: list[FaultStep] = []
    turns: list[Item] = []
    if not spec.nemesis:
        return steps, turns
    items = sorted(
        parse_items(spec.nemesis, spec.topology, spec.zookeepers, spec.controllers),
        key=lambda i: i.text,
    )
    waiting: list[Item] = []
    for start, stop in fault_windows(spec):
        # When, and whose turn, is decided here; what the fault is, the package's menu says.
        waiting = waiting or list(items)
        item = rng.choice(waiting)
        waiting.remove(item)
        turns.append(item)
        if item.package == CHOREO:
            # A sequence of other packages' steps on roles of its own, ended in the window.
            topo = build_topology(
                spec.topology, zookeepers=spec.zookeepers, controllers=spec.controllers
            )
            steps += choreo.draw(rng, topo, start, stop, spec.time_limit, item.kinds)
            continue
        menu = MENUS[item.package]
        steps += menu.draw(
            rng, spec.topology, spec.nemesis_interval, start, stop, item.kinds, item.target
        )
    return steps, turns


def without_window(spec: RunSpec, turns: list[Item]) -> str | None:
    """A sentence naming the items of ``--nemesis`` that got no fault window, and the time limit
    that fits them all; None when each got one."""
    given = {i.text for i in turns}
    missed = [t for t in spec.nemesis if t not in given]
    if not missed:
        return None
    windows = len(turns)
    fits = len(spec.nemesis) * (spec.nemesis_interval + spec.quiet_s)
    quiet = "" if spec.nemesis_quiet is None else f" and --nemesis-quiet {spec.quiet_s:g} s"
    return (
        f"--time-limit {spec.time_limit:g} s with --nemesis-interval {spec.nemesis_interval:g} s"
        f"{quiet} has {windows} fault window{'s' if windows != 1 else ''} for "
        f"{len(spec.nemesis)} nemesis items: {', '.join(missed)} got none; --time-limit "
        f"{fits:g} fits them all"
    )


def generator_params(spec: RunSpec) -> dict[str, Any]:
    """How clients choose operations: the workload's own parameters, and how the harness drives
    its clients (their rate, how many, and each process's random stream, from `client_rng`)."""
    return {
        **WORKLOADS[spec.workload].generator(spec.values()),
        "workload": spec.workload,
        "rate": spec.rate,
        "concurrency": spec.concurrency,
        "client_rng": CLIENT_RNG,
        **client_procs(spec),
    }


def client_procs(spec: RunSpec) -> dict[str, Any]:
    """``client_procs`` when a client kind of ``--nemesis`` stops one client alone: each slot's
    client then runs in an OS process of its own (workloads/java_procs.py, and the librdkafka
    client's); and ``client_nets`` besides when one cuts a client's network (each slot's client
    in a network of its own, clusters/client_net.py); absent otherwise, so other plans are as
    they were."""
    if not any(n.split(":", 1)[0].split("@", 1)[0] == "client" for n in spec.nemesis):
        return {}
    items = parse_items(spec.nemesis, spec.topology, spec.zookeepers, spec.controllers)
    kinds = [k for i in items if i.package == "client" for k in (i.kinds or ())]
    wants = {CLIENT_PROCS: True} if needs_processes(kinds) else {}
    return {**wants, CLIENT_NETS: True} if needs_networks(kinds) else wants


def planned_steps(spec: RunSpec, seed: int) -> dict[str, list[PlannedStep]]:
    """Each step family's steps, by its key; each family draws from its own random stream."""
    values = spec.values()
    planned = {f.key: list(f.plan(values, seed)) for f in FAMILIES}
    return {key: steps for key, steps in planned.items() if steps}


def build_plan(spec: RunSpec, seed: int) -> Plan:
    """The whole plan from the spec and the seed; nothing else is consulted."""
    rng = random.Random(f"kchaos/{seed}/plan")
    spec_data = spec.to_dict()
    spec_data["seed"] = seed
    faults, turns = fault_turns(spec, rng)
    short = without_window(spec, turns)
    return Plan(
        seed=seed,
        spec=spec_data,
        generator=generator_params(spec),
        faults=faults,
        steps=planned_steps(spec, seed),
        notes=[short] if short else [],
    )


def load_plan(path: str | Path) -> Plan:
    """A stored plan (a run directory or its plan.json), for a replay: strict JSON, every part
    checked as a plan built from its spec would be, each problem one sentence naming where."""
    p = Path(path)
    if p.is_dir():
        p = p / PLAN_NAME
    try:
        data = json.loads(
            p.read_text(encoding="utf-8"),
            parse_constant=_not_json_number,
            parse_float=_finite_float,
        )
    except OSError as exc:
        raise SpecError(f"{p}: cannot read the plan to replay: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{p}: the plan is not a UTF-8 text file") from None
    except _NotFinite as exc:
        raise SpecError(f"{p}: plan is not strict JSON ({exc}: numbers must be finite)") from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{p}:{exc.lineno}: plan is not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or data.get("kchaos_plan") != PLAN_VERSION:
        raise SpecError(f"{p}: not a kchaos plan of version {PLAN_VERSION}")
    try:
        plan = _plan_of(data)
    except SpecError as exc:
        raise SpecError(f"{p}: {exc}") from None
    return plan


def plan_from_dict(data: Any) -> Plan:
    """A plan from plan.json's parsed data, checked as ``load_plan`` checks a stored one
    (SpecError names the part at fault): what `kchaos shrink` holds each candidate to."""
    if not isinstance(data, dict) or data.get("kchaos_plan") != PLAN_VERSION:
        raise SpecError(f"not a kchaos plan of version {PLAN_VERSION}")
    return _plan_of(data)


class _NotFinite(ValueError):
    pass


def _not_json_number(text: str) -> Any:
    raise _NotFinite(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


_FAMILY_KEYS = {f.key for f in FAMILIES}
_PLAN_KEYS = ("kchaos_plan", "seed", "spec", "generator", "faults")
_FAULT_FIELDS = {f.name: f for f in fields(FaultStep)}


def _plan_of(data: dict[str, Any]) -> Plan:
    """The plan of a stored plan.json's parsed data; SpecError names the part at fault."""
    missing = [k for k in _PLAN_KEYS if k not in data]
    if missing:
        raise SpecError(f"the plan has no {', '.join(missing)}")
    unknown = sorted(set(data) - set(_PLAN_KEYS) - _FAMILY_KEYS)
    if unknown:
        raise SpecError(
            f"unknown key(s) {', '.join(map(repr, unknown))}: a plan holds "
            f"{', '.join(sorted((*_PLAN_KEYS, *_FAMILY_KEYS)))}"
        )
    spec_data = data["spec"]
    if not isinstance(spec_data, dict):
        raise SpecError(f"spec must be a mapping of options, not {_kind(spec_data)}")
    spec = spec_from_dict(spec_data, where="spec")  # the stored spec must still be valid
    seed = data["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise SpecError(f"seed must be a whole number between 0 and {MAX_SEED}, not {seed!r}")
    if spec.seed is not None and spec.seed != seed:
        raise SpecError(f"seed {seed} is not the spec's seed {spec.seed}")
    generator = data["generator"]
    if not isinstance(generator, dict):
        raise SpecError(f"generator must be a mapping, not {_kind(generator)}")
    # The generator is derived from the spec: a value that differs from the spec's is not the
    # plan of that spec (keys a newer or older kchaos adds or drops are left alone).
    derived = generator_params(spec)
    for key in sorted(set(generator) & set(derived)):
        if generator[key] != derived[key]:
            raise SpecError(
                f"generator {key} is {generator[key]!r}, but its spec makes it {derived[key]!r}"
            )
    faults = _faults(data["faults"], spec)
    steps: dict[str, list[PlannedStep]] = {}
    for f in FAMILIES:
        stored = data.get(f.key)
        if not stored:
            continue
        if not isinstance(stored, list) or not all(isinstance(s, dict) for s in stored):
            raise SpecError(f"{f.key} must be a list of steps (mappings)")
        try:
            steps[f.key] = list(f.load(stored))
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"{f.key}: not a list of {f.key} steps ({exc})") from None
    return Plan(seed=seed, spec=spec_data, generator=generator, faults=faults, steps=steps)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _faults(stored: Any, spec: RunSpec) -> list[FaultStep]:
    """A plan's fault steps, each checked as its package checks a step before it acts."""
    if not isinstance(stored, list):
        raise SpecError(f"faults must be a list of fault steps, not {_kind(stored)}")
    out: list[FaultStep] = []
    last = 0.0
    for i, raw in enumerate(stored):
        where = f"faults[{i}]"
        if not isinstance(raw, dict):
            raise SpecError(
                f"{where} must be a mapping with {', '.join(_FAULT_FIELDS)}, not {_kind(raw)}"
            )
        unknown = sorted(set(raw) - set(_FAULT_FIELDS))
        needed = [k for k in ("at_s", "action", "fault", "kind") if k not in raw]
        if unknown or needed:
            raise SpecError(
                f"{where} must be a mapping with {', '.join(_FAULT_FIELDS)}"
                + (f"; unknown: {', '.join(map(str, unknown))}" if unknown else "")
                + (f"; missing: {', '.join(needed)}" if needed else "")
            )
        at_s = raw["at_s"]
        if isinstance(at_s, bool) or not isinstance(at_s, (int, float)):
            raise SpecError(f"{where}.at_s must be a number of seconds, not {at_s!r}")
        if not last <= at_s <= spec.time_limit:
            raise SpecError(
                f"{where}.at_s {at_s:g} must be between the step before ({last:g}) and the "
                f"time limit ({spec.time_limit:g}): a plan's steps are in time order"
            )
        last = at_s
        for key, kinds in (("action", str), ("fault", str), ("kind", str)):
            if not isinstance(raw[key], kinds):
                raise SpecError(f"{where}.{key} must be a string, not {raw[key]!r}")
        if raw["action"] not in ("start", "stop"):
            raise SpecError(f"{where}.action must be start or stop, not {raw['action']!r}")
        target, seed, params = raw.get("target"), raw.get("seed", 0), raw.get("params", {})
        if target is not None and not isinstance(target, str):
            raise SpecError(f"{where}.target must be a string or null, not {target!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise SpecError(f"{where}.seed must be a whole number between 0 and {MAX_SEED}")
        if not isinstance(params, dict):
            raise SpecError(f"{where}.params must be a mapping, not {_kind(params)}")
        group = raw.get("group")
        if group is not None and not isinstance(group, str):
            raise SpecError(f"{where}.group must be a string or null, not {group!r}")
        step = FaultStep(
            at_s, raw["action"], raw["fault"], raw["kind"], target, seed, params, group
        )
        try:
            nemesis = build([step.fault])[step.fault]
            nemesis.check(step)
            kind = nemesis.menu.kind(step.kind)
        except NemesisError as exc:
            raise SpecError(f"{where}: {exc}") from None
        if not kind.applies_to(spec.topology):
            raise SpecError(
                f"{where}: {step.fault} {step.kind} does not apply to topology {spec.topology}"
            )
        out.append(step)
    return out
