"""A campaign spec and its matrix: Jepsen's `test-all`, as plain data.

A campaign spec names run options every cell shares (``base``), axes whose product is the
matrix, cells to leave out (``exclude``), and seeds. Each cell is one `kchaos run` spec, checked
here without a network exactly as `kchaos run --plan-only` checks it, so that a bad cell is
refused before the night starts.

    name: nightly                 # results/<name>/<UTC timestamp>/
    base: {time_limit: 60, timing: fast}
    axes:
      version: ["3.9", "4.1"]
      topology: [kraft-combined, migration]
      workload: [queue, admin]
      nemesis: ["partition,kill", "partition:isolate-active-controller"]
    exclude:
      - {topology: migration, version: "4.1"}   # every key given must match
    seeds: 2                      # seeds 1..N, or a list
    cell_timeout: 900             # wall seconds one cell may take (default: time limit + 900)

With ``hosts: hosts.yaml`` in ``base``, every cell runs on that SSH inventory's cluster
(docs/ssh.md): the inventory names the cluster and its topology, so cells run one at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any

from checkers.analyze.scenario import scenario
from clusters.errors import ClusterError
from clusters.handles import DEFAULT_NAME
from clusters.hold import name_problem
from clusters.topology import check_subnet
from harness.plan import build_plan
from harness.spec import (
    MAX_SEED,
    MAX_TIME_LIMIT,
    RunSpec,
    SpecError,
    check_value,
    load_spec_file,
    scenario_terms,
    spec_from_dict,
)

# Options a campaign sets for every cell itself: where the run writes and which cluster it uses.
OWNED = ("results_dir", "name", "cluster", "subnet", "seed")
DEFAULT_CLUSTER = DEFAULT_NAME  # every command's default (clusters/handles.py)
DEFAULT_SUBNET = "10.213.220.0/24"
# Beyond its time limit a cell brings a cluster up, heals, reads back, collects and checks.
CELL_SLACK_S = 900.0
KEYS = ("name", "base", "axes", "exclude", "seeds", "cell_timeout", "cluster", "subnet")
# Bounds that keep a campaign's expansion (one plan per cell, built before anything runs) fast:
# seeds per cell, and cells in all (the matrix times the seeds).
MAX_SEEDS = 1000
MAX_CELLS = 10_000
# A cell's wall time: at most the longest run and a day of slack.
MAX_CELL_TIMEOUT = MAX_TIME_LIMIT + 86_400


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: its scenario (what it tests, without the seed: the name `kchaos
    analyze` trends over, checkers/analyze/scenario.py), the axes' values, and its seed."""

    index: int
    scenario: str
    options: dict[str, Any]
    seed: int
    label: str = ""

    @property
    def id(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.label or self.scenario).strip("-")
        return f"{self.index:03d}-{slug}-s{self.seed}"

    def run_spec(self, results_dir: Path, cluster: str, subnet: str) -> dict[str, Any]:
        """The cell's `kchaos run --spec` file content (on SSH hosts: no subnet, and the cluster
        is the inventory's)."""
        where = {"cluster": cluster} if self.options.get("hosts") else {
            "cluster": cluster, "subnet": subnet,
        }  # fmt: skip
        return {
            **self.options,
            "seed": self.seed,
            "name": self.id,
            "results_dir": str(results_dir),
            **where,
        }


@dataclass
class Campaign:
    name: str
    cells: list[Cell]
    cell_timeout: float
    cluster: str = DEFAULT_CLUSTER
    subnet: str = DEFAULT_SUBNET
    raw: dict[str, Any] = field(default_factory=dict)
    axes: list[str] = field(default_factory=list)
    # The SSH inventory every cell runs on (absolute), None: Docker.
    hosts: str | None = None


def axes_label(options: dict[str, Any], axes: list[str]) -> str:
    """What varies between cells, in the axes' order: ``queue / kraft-combined / 3.9 /
    partition,kill`` (cell ids and the matrix's rows)."""
    parts = []
    for axis in axes:
        value = options.get(axis)
        if isinstance(value, list):
            value = ",".join(str(v) for v in value) or "none"
        parts.append(str(value))
    return " / ".join(parts) or "run"


def load_campaign(path: str | Path, overrides: dict[str, Any] | None = None) -> Campaign:
    """The campaign of a spec file, every cell checked; SpecError names the first bad one."""
    raw = load_spec_file(path)
    return expand(raw, where=str(path), overrides=overrides)


def expand(raw: dict[str, Any], where: str = "campaign", overrides: dict | None = None) -> Campaign:
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(unknown)}: a campaign has {', '.join(KEYS)}"
        )
    name = str(raw.get("name") or Path(where).stem)
    _a_name(name, "name", where)
    base = _mapping(raw.get("base") or {}, f"{where}: base")
    for key, value in (overrides or {}).items():
        # Checked on its own first: a bad value is the --set's, not the first cell's.
        try:
            check_value(key, value)
        except SpecError as exc:
            raise SpecError(f"--set {key}: {exc}") from None
    base.update(overrides or {})
    owned = sorted(k for k in base if k.replace("-", "_") in OWNED)
    if owned:
        raise SpecError(f"{where}: base sets {', '.join(owned)}: the campaign sets those per cell")
    axes = _mapping(raw.get("axes") or {}, f"{where}: axes")
    clash = sorted(set(overrides or {}) & set(axes))
    if clash:
        raise SpecError(f"--set {', '.join(clash)}: an axis of this campaign; edit its axes")
    for axis, values in axes.items():
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where}: axis '{axis}' must be a non-empty list")
        if axis.replace("-", "_") in OWNED:
            raise SpecError(f"{where}: '{axis}' cannot be an axis: the campaign sets it per cell")
    excludes = raw.get("exclude") or []
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise SpecError(f"{where}: exclude must be a list of mappings")
    excludes = [_exclude(e, i, axes, where) for i, e in enumerate(excludes)]
    seeds = _seeds(raw.get("seeds", 1), where)
    size = len(seeds)
    for values in axes.values():
        size *= len(values)
    if size > MAX_CELLS:
        raise SpecError(
            f"{where}: the matrix and seeds make {size:,} cells: at most {MAX_CELLS:,} "
            "(fewer axis values or seeds)"
        )
    subnet = raw.get("subnet")
    if subnet is not None:
        try:
            check_subnet(subnet, 0)
        except ClusterError as exc:
            raise SpecError(f"{where}: {exc}") from None
    names = list(axes)
    combos = [dict(zip(names, values, strict=True)) for values in product(*axes.values())]
    kept = [c for c in combos if not any(_matches(c, e) for e in excludes)]
    if not kept:
        raise SpecError(f"{where}: every cell of the matrix is excluded")
    cells = []
    inventories: dict[str | None, str] = {}
    for combo in kept:
        options = {**base, **combo}
        label = axes_label(options, names)
        # A cell is a new run (`kchaos run --spec`): what it leaves out gets a new run's value.
        spec = spec_from_dict(dict(options), where=f"{where}: cell {label}", fresh=True)
        inventories.setdefault(spec.hosts, spec.cluster)
        if spec.hosts:
            # Absolute, as the spec made it: a cell's run starts in the repository.
            options["hosts"] = spec.hosts
        tests = scenario(spec.to_dict(), scenario_terms())
        for seed in seeds:
            # Checked as `kchaos run --plan-only` checks (plan included), before anything runs.
            build_plan(replace(spec, seed=seed), seed)
            cells.append(Cell(len(cells) + 1, tests, options, seed, label))
    if len(inventories) > 1:
        raise SpecError(
            f"{where}: cells on different clusters ({', '.join(str(h) for h in inventories)}): "
            "a campaign runs on Docker or on one SSH inventory (base: hosts)"
        )
    hosts = next(iter(inventories))
    if hosts is not None and (raw.get("cluster") or raw.get("subnet")):
        raise SpecError(f"{where}: cluster and subnet come from the inventory {hosts}")
    limit = max(float(c.options.get("time_limit", RunSpec().time_limit)) for c in cells)
    timeout = raw.get("cell_timeout", limit + CELL_SLACK_S)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 1 <= timeout <= MAX_CELL_TIMEOUT  # NaN is neither
    ):
        raise SpecError(
            f"{where}: cell_timeout must be a number of seconds between 1 and "
            f"{MAX_CELL_TIMEOUT}, not {timeout!r}"
        )
    cluster = inventories[hosts] if hosts else str(raw.get("cluster") or DEFAULT_CLUSTER)
    if not hosts:
        _a_name(cluster, "cluster", where)
    return Campaign(
        name=name,
        cells=cells,
        cell_timeout=float(timeout),
        cluster=cluster,
        subnet="" if hosts else str(raw.get("subnet") or DEFAULT_SUBNET),
        raw=raw,
        axes=names,
        hosts=hosts,
    )


def _a_name(value: str, key: str, where: str) -> None:
    problem = name_problem(value)
    if problem:
        raise SpecError(f"{where}: {key} '{value}' is not a name: {problem}")


def _exclude(entry: dict[Any, Any], i: int, axes: dict[str, list[Any]], where: str) -> dict:
    """An exclude entry whose every key is an axis and every value one of that axis's (as
    ``_matches`` compares them), its keys spelled as the axes'; an entry that could exclude
    nothing is refused instead of ignored."""
    if not entry:
        raise SpecError(f"{where}: exclude[{i}] is empty: name an axis and one of its values")
    out = {}
    for raw_key, value in entry.items():
        key = str(raw_key).replace("-", "_")
        if key not in axes:
            raise SpecError(
                f"{where}: exclude[{i}]: '{raw_key}' is not an axis (axes: {', '.join(axes)})"
            )
        if str(value) not in {str(v) for v in axes[key]}:
            raise SpecError(
                f"{where}: exclude[{i}]: '{value}' is not a value of axis {key} "
                f"(values: {', '.join(map(str, axes[key]))})"
            )
        out[key] = value
    return out


def _matches(combo: dict[str, Any], exclude: dict[str, Any]) -> bool:
    return all(str(combo.get(k)) == str(v) for k, v in exclude.items())


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a mapping, found {type(value).__name__}")
    return {str(k).replace("-", "_"): v for k, v in value.items()}


def _seeds(value: Any, where: str) -> list[int]:
    if isinstance(value, bool):
        raise SpecError(f"{where}: seeds must be a count or a list of seeds")
    if isinstance(value, int):
        if not 1 <= value <= MAX_SEEDS:
            raise SpecError(
                f"{where}: seeds must be a count between 1 and {MAX_SEEDS}, not {value}"
            )
        return list(range(1, value + 1))
    if (
        isinstance(value, list)
        and value
        and all(isinstance(s, int) and not isinstance(s, bool) for s in value)
    ):
        if len(value) > MAX_SEEDS:
            raise SpecError(f"{where}: at most {MAX_SEEDS} seeds, not {len(value)}")
        bad = [s for s in value if not 0 <= s <= MAX_SEED]
        if bad:
            raise SpecError(f"{where}: seed {bad[0]} is not between 0 and {MAX_SEED}")
        if len(set(value)) != len(value):
            raise SpecError(f"{where}: seeds repeat")
        return list(value)
    raise SpecError(f"{where}: seeds must be a count or a non-empty list of whole numbers")


def parse_overrides(items: tuple[str, ...]) -> dict[str, Any]:
    """``--set key=value`` (YAML values: ``--set time_limit=20``) into base options."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--set {item!r}: expected KEY=VALUE")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise SpecError(f"--set {item}: not a YAML value ({problem})") from None
        out[key.strip().replace("-", "_")] = parsed
    return out
