"""What a run is asked to do: options from the command line or a spec file, checked in one place.

A spec is plain data so that it can be written into the run directory and read back for a replay;
every problem with one becomes a single SpecError sentence naming the field.

Every option is declared once (history/options.py): the harness's own on ``RunSpec``'s fields
(``option(...)``), a workload kind's in its ``OPTIONS``, a step family's in its ``Family``
(steps/registry.py). ``RunSpec`` holds the harness's fields and every kind's and family's
options in ``options`` (by name, defaults filled in); the spec file's keys, their coercion, each
option's own refusals, ``to_dict`` (plan.json's spec), the command line (harness/cli/run_cli.py)
and the scenario name's terms (``scenario_terms``) come from the declarations.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from checkers.analyze.scenario import ScenarioTerms
from checkers.core.states import BY_NAME as STATES
from clusters.disk_layer import MAX_WRITEBACK_S, NAME_MODES
from clusters.errors import ClusterError
from clusters.handles import DEFAULT_NAME
from clusters.hold import name_problem
from clusters.kafka_dist import DEFAULT_VERSION, check_release, newest_line
from clusters.quorum import QUORUMS, STATIC, check_quorum
from clusters.topology import (
    DEFAULT_SUBNET,
    TOPOLOGIES,
    ZK_TOPOLOGIES,
    build_topology,
    check_zookeeper_version,
)
from history.options import (
    AS_ASKED,
    Option,
    OptionError,
    Values,
    coerce,
    declared,
    option,
    refuse_each,
    refuse_inapplicable,
    with_fresh,
)
from nemesis.items import (
    EXAMPLE,
    SYNTAX,
    ItemError,
    named_selectors,
    on_disk_layer,
    parse_items,
)
from steps.registry import FAMILIES, STEP_OPTIONS
from workloads.pipelined import ASYNC
from workloads.queue_ops import FINAL_READ_RATE
from workloads.registry import WORKLOAD_OPTIONS, WORKLOADS
from workloads.share import NAME as SHARE_WORKLOAD

TIMINGS = ("fast", "default")
AVAILABILITY = ("report", "fail")  # the first is what a run without the option does
# checkers/families/liveness/check.py LIVENESS_OPTIONS, the first the default
LIVENESS = ("report", "fail")


class SpecError(Exception):
    """A spec (file or options) that cannot be run; the message is the whole story."""


def _workload(flag: str, value: Any) -> str | None:
    if value in WORKLOADS:
        return None
    return f"unknown workload '{value}': valid workloads are {', '.join(WORKLOADS)}"


def _zookeepers(flag: str, value: Any) -> str | None:
    return None if value in (1, 3) else f"zookeepers must be 1 or 3, not {value}"


# The ranges of the harness's numbers (history/options.py refuses a value outside them, and
# NaN or infinity, wherever it comes from): a run of at most a week, a seed a signed 64-bit
# integer, and a plan of at most so many fault windows (time limit / nemesis interval), so that
# planning stays fast and plan.json small for every accepted value.
MAX_TIME_LIMIT = 7 * 24 * 3600
MAX_SEED = 2**63 - 1
MAX_FAULT_WINDOWS = 5_000


def _states(flag: str, value: Any) -> str | None:
    """Comma-separated names of checkers/core/states.py's states."""
    names = [n.strip() for n in str(value).split(",")]
    unknown = [n for n in names if n not in STATES]
    if not unknown:
        return None
    return f"{flag}: not a state: {', '.join(unknown)} (the states: {', '.join(STATES)})"


def _a_name(flag: str, value: Any) -> str | None:
    problem = name_problem(value)
    return f"{flag} '{value}' is not a name: {problem}" if problem else None


def _all_options() -> dict[str, Any]:
    return {o.name: o.default for o in STEP_OPTIONS + WORKLOAD_OPTIONS}


def _names_disk(items: list[str]) -> bool:
    """Whether a --nemesis list names a fault that acts on the disk layer (the disk package,
    shutdown:elr-power-loss, a choreography that powers a node off: nemesis/items.py
    on_disk_layer)."""
    return on_disk_layer(items)


@dataclass
class RunSpec:
    """The harness's own options, each field its declaration, and the workload options."""

    workload: str = option(
        "queue",
        check=_workload,
        help="What the clients do: queue (sends and polls, Jepsen's Kafka queue), admin "
        "(topic and config requests) or share (share groups, KIP-932, Kafka 4.1+).",
        # The choices shown, its own sentence kept for any other value ("unknown workload").
        cli={"metavar": f"[{'|'.join(WORKLOADS)}]"},
    )
    topology: str = option(
        "kraft-combined",
        choices=TOPOLOGIES,
        help="The cluster's layout: kraft-combined (3 nodes, broker+controller), kraft (3 "
        "controllers + 3 brokers), zk (ZooKeeper + 3 brokers, Kafka 3.x), migration (ZooKeeper "
        "brokers migrated to KRaft during the run).",
    )
    # ZooKeeper ensemble size in zk mode: 3 lets a nemesis take its leader without losing ZK.
    zookeepers: int = option(
        1,
        check=_zookeepers,
        applies_with=("topology", ZK_TOPOLOGIES),
        help="ZooKeeper nodes with --topology zk or migration (1 or 3).",
        minimum=1,
        maximum=3,
    )
    # KRaft voters: five for KIP-996's pre-vote layout (nemesis/partition.py one-way-layout).
    # Written into plan.json only when not 3, so every earlier plan keeps its meaning.
    controllers: int = option(
        3,
        stored=AS_ASKED,
        applies_with=("topology", ("kraft-combined", "kraft")),
        help="KRaft controllers (kraft-combined: nodes, each broker and controller; kraft: "
        "dedicated controllers beside 3 brokers), 1 to 9; five for the pre-vote layout.",
        minimum=1,
        maximum=9,
    )
    version: str = option(
        DEFAULT_VERSION,
        fresh=lambda v: newest_line(v["topology"]),
        help="Kafka version or line (a line means its newest release). Default: the newest "
        "line kchaos runs for the topology, 4.4 for KRaft and 3.9 for zk and migration "
        "(Kafka 4.0 removed ZooKeeper mode).",
    )
    nemesis: list[str] = option(  # noqa: RUF009 (a list default: option() copies it per spec)
        [],
        help=f"Faults, comma-separated: each item is {SYNTAX}. A package draws any of its kinds, "
        "a kind only itself, a target fixes whom it hits (kill and pause: the kind is the target). "
        "Every item gets a fault window before any gets a second; `kchaos nemeses` lists every "
        f"package, kind, target and parameter.\n\n\b\ne.g. partition,kill\n     {EXAMPLE}",
    )
    time_limit: float = option(
        30.0,
        help="Seconds of workload (up to 7 days).",
        minimum=1,
        maximum=MAX_TIME_LIMIT,
        unit="seconds",
    )
    concurrency: int = option(4, help="Worker processes (clients) at once.", minimum=1, maximum=256)
    # Total invocations per second across clients; 0: as fast as they can. With pipelined
    # sends, the sends' (workers.py): the pollers beside them are not paced.
    rate: float = option(
        50.0,
        # A share run's pipelined producers stay paced: its consumers must keep up.
        fresh=lambda v: 0.0 if v["send_mode"] == ASYNC and v["workload"] == "queue" else 50.0,
        help="Operations per second, all clients together, with --send-mode sync (default "
        "50); with async, sends per second of all producers together (default 0), the "
        "pollers unpaced. 0: unlimited (pipelined sends: as many as --in-flight lets).",
        minimum=0,
        maximum=100_000,
        unit="operations per second; 0: unlimited",
    )
    nemesis_interval: float = option(
        10.0,
        help="Seconds a fault stays on, and then off; a run holds at most "
        f"{MAX_FAULT_WINDOWS:,} such fault windows.",
        minimum=0.1,
        maximum=MAX_TIME_LIMIT,
        unit="seconds",
    )
    # The quiet period before the first fault window and after each (harness/plan.py
    # fault_windows); None: as long as the interval, as every plan before the option.
    nemesis_quiet: float | None = option(
        kind=float,
        stored=AS_ASKED,
        minimum=0,
        maximum=MAX_TIME_LIMIT,
        unit="seconds",
        help="Seconds with no fault before the first fault window and after each one, while "
        "the --nemesis items take turns (default: as long as --nemesis-interval).",
    )
    timing: str = option(
        "default",
        choices=TIMINGS,
        help="The cluster's timeouts: default, or fast (short heartbeats, sessions and elections "
        "for quick fault tests).",
    )
    seed: int | None = option(
        kind=int,
        tested=False,
        help="Fixes every random choice (default: random).",
        minimum=0,
        maximum=MAX_SEED,
    )
    # results/<name>/; defaults to the workload
    name: str | None = option(
        kind=str, check=_a_name, tested=False, help="results/<name>/ (default: the workload)."
    )
    keep_cluster: bool = option(False, tested=False, help="Leave the cluster up after the run.")
    # Where the run's Docker cluster lives; several runs (or tests) can coexist with their own.
    # "kchaos-run" is what a stored plan without a cluster meant; a new run's default is the
    # one every command shares (clusters/handles.py DEFAULT_NAME).
    cluster: str = option(
        "kchaos-run",
        check=_a_name,
        tested=False,
        fresh=lambda v: None if v.get("hosts") else DEFAULT_NAME,
        help=f"Docker cluster name (default {DEFAULT_NAME}, as every kchaos command's).",
    )
    subnet: str = option(
        DEFAULT_SUBNET, tested=False, help="The Docker network of the run's cluster (a CIDR)."
    )
    results_dir: str = option(
        "results",
        tested=False,
        help="The results folder: the run is written under <results-dir>/<name>/.",
    )
    final_timeout: float = option(
        60.0,
        minimum=1,
        maximum=86_400,
        unit="seconds",
        help="Bound on the final reads, seconds; a queue run adds a second per "
        f"{min(FINAL_READ_RATE.values()):,.0f} acknowledged sends (by client: "
        "workloads/queue_ops.py), and goes on while records are still being read.",
    )
    # The controller quorum (clusters/quorum.py): static (None), dynamic (KIP-853, with
    # controller membership steps, steps/quorum_steps.py), or static-to-dynamic (4.1+);
    # checked with the topology and releases (check_quorum). The harness's: the cluster is
    # brought up with it (its topology's quorum), beside the steps it plans.
    quorum: str | None = option(
        kind=str,
        stored=AS_ASKED,
        choices=QUORUMS,
        quiet=(STATIC,),
        help="The controller quorum: static (controller.quorum.voters, the default), dynamic "
        "(KIP-853, Kafka 3.9+: a controller is removed and added back during the run), "
        "static-to-dynamic (Kafka 4.1+: kraft.version raised to 1 first), or dynamic-auto-join "
        "(Kafka 4.2+: controllers join the quorum themselves); docs/upgrades.md.",
    )
    # What a spurious fence of a healthy broker does to the verdict (checkers/families/metadata_log/
    # liveness.py): reported and tolerated (None, "report"), or a failure ("fail").
    availability: str | None = option(
        kind=str,
        choices=AVAILABILITY,
        stored=AS_ASKED,
        quiet=(AVAILABILITY[0],),
        help="What a spurious fence of a healthy broker does to the verdict: report it, "
        "tolerated (the default), or fail the run (docs/checkers.md, lease liveness).",
    )
    # What a liveness finding does to the verdict (checkers/families/liveness/): reported in
    # results.json's liveness block, tolerated (None, "report"), or a failure ("fail").
    liveness: str | None = option(
        kind=str,
        choices=LIVENESS,
        stored=AS_ASKED,
        quiet=(LIVENESS[0],),
        help="What a liveness finding (no progress while a majority is healthy, a broker or "
        "controller not back after the heal, ...) does to the verdict: report it, tolerated "
        "(the default), or fail the run (docs/checkers.md, Liveness).",
    )
    # A bound on the time from the last heal to each operation type's first ok
    # (checkers/families/liveness/progress.py); None: the times are reported, never judged.
    recovery_bound: float | None = option(
        kind=float,
        stored=AS_ASKED,
        minimum=0.1,
        maximum=MAX_TIME_LIMIT,
        unit="seconds",
        help="Seconds each operation type has after the last heal to succeed again; beyond "
        "it, a slow-recovery liveness finding (default: the recovery times are only "
        "reported).",
    )
    # States of checkers/core/states.py the run must reach (checkers/families/coverage/): a run
    # that reaches none of some is marked as not exercising its scenario (results.json
    # coverage.missing). None: nothing is required.
    must_reach: str | None = option(
        kind=str,
        stored=AS_ASKED,
        check=_states,
        tested=False,
        help="States the run must reach, comma-separated (e.g. "
        "leader-change-with-sends-in-flight,broker-fenced; docs/checkers.md, Coverage): a run "
        "that misses one is marked as not exercising its scenario.",
    )
    # An SSH inventory (clusters/inventory.py, docs/ssh.md): the run's cluster is brought up on
    # its hosts instead of Docker, and takes their name and topology. None: Docker.
    hosts: str | None = option(
        kind=str,
        stored=AS_ASKED,
        help="Run on the hosts of this SSH inventory instead of Docker (docs/ssh.md): the "
        "cluster takes their name and topology.",
    )
    # Every node's data directories on the disk layer (clusters/disk_layer.py, docs/disk.md),
    # with the name mode it runs with; None: plain directories. Docker only.
    disk_layer: str | None = option(
        kind=str,
        choices=NAME_MODES,
        stored=AS_ASKED,
        # The disk package's faults act on the layer: a new run naming it gets it.
        fresh=lambda v: NAME_MODES[0] if _names_disk(v["nemesis"]) else None,
        help="Run every node's data directories on kchaos's disk layer, which keeps what no "
        "fsync made durable so that a power loss can drop it (docs/disk.md): journal (a "
        "create, unlink or rename is durable at the next fsync of anything, as on ext4) or "
        "strict (at an fsync of its directory, as POSIX says).",
    )
    # With the disk layer: the seconds after which what is pending becomes durable, as a
    # kernel's writeback makes it; None: only an fsync does (the worst case).
    disk_writeback: float | None = option(
        kind=float,
        stored=AS_ASKED,
        applies_with=("disk_layer", NAME_MODES),
        minimum=0,
        maximum=MAX_WRITEBACK_S,
        unit="seconds",
        help="With the disk layer: what has been pending this many seconds becomes durable, "
        "as a kernel's writeback (30 s on Linux) and a journal's commit make it; default: only "
        "an fsync makes anything durable, the worst case (docs/disk.md).",
    )
    # Every step family's and workload kind's options by name (steps/registry.py STEP_OPTIONS,
    # workloads/registry.py WORKLOAD_OPTIONS).
    options: dict[str, Any] = field(default_factory=_all_options)

    @classmethod
    def of(cls, **values: Any) -> RunSpec:
        """A spec of harness and workload options alike, by name; unchecked (``validate``)."""
        mine = {k: v for k, v in values.items() if k in HARNESS_NAMES}
        theirs = {k: v for k, v in values.items() if k not in HARNESS_NAMES}
        unknown = sorted(set(theirs) - set(_all_options()))
        if unknown:
            raise TypeError(f"RunSpec.of: unknown option(s) {', '.join(unknown)}")
        return cls(**mine, options={**_all_options(), **theirs})

    @property
    def run_name(self) -> str:
        return self.name or self.workload

    def releases(self) -> list[str]:
        """Every Kafka release the run starts on or rolls to, first the one it starts on, then
        each step family's in the registry's order."""
        given = Values(**self.options)
        return [self.version, *(r for f in FAMILIES for r in f.releases(given))]

    def values(self) -> Values:
        """What a workload's generator and checks and a step family's plan and check read:
        every option's value, and the releases."""
        return Values(
            **self.options,
            **{o.name: getattr(self, o.name) for o in HARNESS_OPTIONS},
            releases=tuple(self.releases()),
        )

    def value(self, name: str) -> Any:
        """Any option's value by name, the harness's or a workload's."""
        return getattr(self, name) if name in HARNESS_NAMES else self.options[name]

    def to_dict(self) -> dict[str, Any]:
        """plan.json's spec: every option the first plans had, and the later ones only when
        they ask for something a run without them does not (every earlier plan.json stays the
        same; options.py ``stored``)."""
        out = {}
        for o in OPTIONS:
            value = self.value(o.name)
            if o.stores(value):
                out[o.name] = list(value) if isinstance(value, list) else value
        return out

    @property
    def quiet_s(self) -> float:
        """The seconds with no fault before each fault window: the option's, else the
        interval."""
        return self.nemesis_interval if self.nemesis_quiet is None else self.nemesis_quiet

    @property
    def quorum_mode(self) -> str:
        return self.quorum or STATIC

    @property
    def disk_layer_mode(self) -> str | None:
        """The disk layer the cluster runs on: the option's, else journal where the disk
        package's faults need one (a spec made in code, which no fresh value filled in)."""
        if self.disk_layer is None and _names_disk(self.nemesis):
            return NAME_MODES[0]
        return self.disk_layer


# The harness's options, then every step family's, then every workload kind's: the command
# line's and spec files'.
HARNESS_OPTIONS: tuple[Option, ...] = declared(RunSpec)
HARNESS_NAMES = frozenset(o.name for o in HARNESS_OPTIONS)
OPTIONS: tuple[Option, ...] = HARNESS_OPTIONS + STEP_OPTIONS + WORKLOAD_OPTIONS
_BY_NAME = {o.name: o for o in OPTIONS}
if len(_BY_NAME) != len(OPTIONS):
    # An option named as another room's would shadow it in a spec file.
    raise ValueError("a workload or step option has the name of another one")


def scenario_terms() -> ScenarioTerms:
    """What the scenario name (checkers/analyze/scenario.py) needs of the declarations: the
    values that mean "as a run without the option", and the options that say where or how a
    run is kept rather than what it tests."""
    return ScenarioTerms(
        defaults={o.name: (o.default, *o.quiet) for o in OPTIONS},
        kept=frozenset(o.name for o in OPTIONS if not o.tested),
    )


def _refuse(spec: RunSpec, *names: str) -> None:
    for name in names:
        try:
            _BY_NAME[name].refuse(spec.value(name))
        except OptionError as exc:
            raise SpecError(str(exc)) from None


# A refusal's sentence starts with the option(s) at fault, spelled as flags and followed by a
# colon ("--time-limit: must be ...", "--txn, --mode: only apply with ..."), whichever module
# wrote it: one prefix for every refusal of a run's options, on the command line, in a spec
# file and in a campaign's cells.
_FLAGS = "|".join(sorted((re.escape(o.flag) for o in OPTIONS), key=len, reverse=True))
_LEADING = re.compile(rf"((?:--)?(?:{_FLAGS})(?:, (?:--)?(?:{_FLAGS}))*)(?::? )(.*)", re.S)


def flagged(text: str) -> str:
    """``text`` with the options it starts with spelled ``--flag: ``; a sentence that starts
    with no option's name is returned as it is."""
    m = _LEADING.fullmatch(text)
    if m is None:
        return text
    flags = ", ".join("--" + f.removeprefix("--") for f in m.group(1).split(", "))
    return f"{flags}: {m.group(2)}"


def validate(spec: RunSpec) -> RunSpec:
    """Raises SpecError on the first thing that cannot work (its sentence starting with the
    option at fault: ``flagged``); returns the spec unchanged."""
    try:
        return _validate(spec)
    except SpecError as exc:
        raise SpecError(flagged(str(exc))) from None


def _validate(spec: RunSpec) -> RunSpec:
    _refuse(spec, "workload", "topology")
    # Numbers first: every later check (and the plan) may compute with them.
    _refuse(spec, *(o.name for o in OPTIONS if o.kind in (int, float) and o.name in HARNESS_NAMES))
    try:
        parse_items(spec.nemesis, spec.topology, spec.zookeepers, spec.controllers)
    except ItemError as exc:
        raise SpecError(f"--nemesis: {exc}") from None
    for i, release in enumerate(spec.releases()):
        # Named by the option that gave it: the first is --version's, the rest a step family's.
        flag = "version"
        if i:
            flag = next((o.flag for o in STEP_OPTIONS if spec.options[o.name] == release), flag)
        try:
            check_release(release)
        except ClusterError as exc:
            raise SpecError(f"--{flag}: {exc}") from None
    try:
        check_zookeeper_version(spec.topology, spec.version)
    except ClusterError as exc:
        raise SpecError(f"--version: {exc}") from None
    values = spec.values()
    # The step families' options: each one's own refusals, then each family's of what it
    # cannot plan (the upgrade's paths and feature steps).
    try:
        refuse_each(STEP_OPTIONS, values)
        for family in FAMILIES:
            family.check(values)
    except OptionError as exc:
        raise SpecError(str(exc)) from None
    try:
        if spec.quorum is not None:
            check_quorum(spec.quorum, spec.topology, spec.releases())
    except ClusterError as exc:
        raise SpecError(str(exc)) from None
    if spec.controllers != 3 and (spec.quorum_mode != STATIC or any(spec.releases()[1:])):
        # Their plans lay the steps out over the topology's three controllers.
        raise SpecError(
            "--controllers: upgrade, downgrade and controller membership steps plan for three "
            f"controllers, not {spec.controllers}"
        )
    _refuse(spec, "availability", "liveness", "recovery_bound", "must_reach")
    # The workload options: each one's own refusals, then each kind's of their combinations.
    try:
        refuse_each(WORKLOAD_OPTIONS, values)
        for kind in WORKLOADS.values():
            kind.check(values)
        # Options given where they cannot apply (history/options.py applies_with).
        refuse_inapplicable(OPTIONS, values)
    except OptionError as exc:
        raise SpecError(str(exc)) from None
    _refuse(spec, *(o.name for o in HARNESS_OPTIONS))
    # A fault window is on for one interval and off for the quiet period (harness/plan.py
    # fault_windows).
    windows = spec.time_limit / (spec.nemesis_interval + spec.quiet_s)
    if spec.nemesis and windows > MAX_FAULT_WINDOWS:
        raise SpecError(
            f"--time-limit: {spec.time_limit:g} with --nemesis-interval {spec.nemesis_interval:g} "
            + (f"and --nemesis-quiet {spec.quiet_s:g} " if spec.nemesis_quiet is not None else "")
            + f"makes {windows:,.0f} fault windows: at most {MAX_FAULT_WINDOWS:,} (a longer "
            "--nemesis-interval, or a shorter --time-limit)"
        )
    try:
        # The cluster's layout is pure data: a subnet that cannot hold it is refused here, as
        # the run would refuse it, and not after the run directory exists.
        build_topology(
            spec.topology,
            cluster=spec.cluster,
            zookeepers=spec.zookeepers,
            subnet=spec.subnet,
            controllers=spec.controllers,
        )
    except ClusterError as exc:
        # The topology and cluster name were checked before: what is left is the subnet's.
        raise SpecError(
            flagged(str(exc)) if str(exc).startswith("subnet") else f"--subnet: {exc}"
        ) from None
    return spec


def spec_from_dict(data: Any, where: str | None = "spec", *, fresh: bool = False) -> RunSpec:
    """A validated spec from a mapping of options; ``where`` (a file's name) starts each
    refusal, None for the command line, whose refusals start with the flag itself. `fresh`: a
    new run's (a command line, a spec file, a campaign cell), whose options left out get their
    ``fresh`` value (history/options.py with_fresh: pipelined sends, for one); without it, a
    stored plan's, whose options left out mean their default, as when it was written."""
    at = f"{where}: " if where else ""
    if not isinstance(data, dict):
        raise SpecError(f"{at}expected a mapping of options, found {type(data).__name__}")
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key not in _BY_NAME:
            raise SpecError(
                f"{at}unknown option '{raw_key}': options are "
                f"{', '.join(sorted(o.flag for o in OPTIONS))}"
            )
        try:
            values[key] = coerce(_BY_NAME[key], value)
        except OptionError as exc:
            raise SpecError(f"{at}{exc}") from None
    try:
        if values.get("hosts"):
            values.update(_on_hosts(values, RunSpec()))
        # After the inventory's: a run on its hosts takes their cluster name and topology, and
        # the default version follows that topology.
        if fresh:
            values = with_fresh(OPTIONS, values)
        return check_named_targets(validate(RunSpec.of(**values)))
    except SpecError as exc:
        raise SpecError(f"{at}{exc}") from None


def check_value(key: str, value: Any) -> Any:
    """One option's value as a spec file gives it (``kchaos campaign --set KEY=VALUE``): the
    option's type and its own refusals; SpecError says why, without naming where it came from."""
    name = str(key).replace("-", "_")
    o = _BY_NAME.get(name)
    if o is None:
        raise SpecError(
            f"unknown option '{key}': options are {', '.join(sorted(o.flag for o in OPTIONS))}"
        )
    try:
        coerced = coerce(o, value)
        o.refuse(coerced)
    except OptionError as exc:
        # The caller names the key (--set KEY: ...): the sentence without the flag again.
        raise SpecError(str(exc).removeprefix(f"--{o.flag}: ")) from None
    return coerced


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a YAML or JSON spec file (JSON is YAML, but its errors read better)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{p}: cannot read spec file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{p}: not a UTF-8 text file (a spec is YAML or JSON)") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{p}{line}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        raise SpecError(f"{p}: the spec file is empty")
    if not isinstance(data, dict):
        raise SpecError(f"{p}: expected a mapping of options, found {type(data).__name__}")
    return data


def _on_hosts(values: dict[str, Any], defaults: RunSpec) -> dict[str, Any]:
    """A run on an inventory's hosts takes their cluster name and topology: an option left at
    its default becomes the inventory's, one given otherwise is refused. The inventory's path
    is kept absolute, so a replay from elsewhere finds it."""
    from clusters.inventory import load_inventory

    try:
        inventory = load_inventory(values["hosts"])
        kind = inventory.topology().kind
    except ClusterError as exc:
        raise SpecError(f"hosts: {exc}") from None
    out: dict[str, Any] = {"hosts": str(inventory.path or values["hosts"])}
    for key, theirs in (("cluster", inventory.cluster), ("topology", kind)):
        given = values.get(key)  # None: left out (a new run's fresh value comes after this)
        if given not in (None, getattr(defaults, key), theirs):
            raise SpecError(
                f"{key} {given!r}: a run on the hosts of {values['hosts']} has theirs ({theirs!r})"
            )
        out[key] = theirs
    for key in ("subnet", "zookeepers"):
        # The inventory gives the hosts' addresses and ZooKeeper nodes: these cannot apply.
        if values.get(key) not in (None, getattr(defaults, key)):
            raise SpecError(
                f"--{key} {values[key]}: a run on the hosts of {values['hosts']} takes the "
                "inventory's addresses and nodes; drop it"
            )
    if values.get("quorum") not in (None, STATIC):
        # Controller membership steps re-provision a controller the way the node image takes
        # it (steps/quorum_steps.py).
        raise SpecError("--quorum dynamic and static-to-dynamic are not supported on SSH hosts yet")
    if values.get("disk_layer") is not None:
        # The layer is mounted from the program Docker's nodes mount (clusters/disk_layer.py).
        raise SpecError("--disk-layer is not supported on SSH hosts yet")
    items = values.get("nemesis")
    if on_disk_layer(_listed(items)):
        # Power losses act on the layer; a choreography also names its nodes as Docker's.
        raise SpecError(
            "--nemesis: power losses (disk, and the choreographies that use them) need the "
            "disk layer, which runs on Docker nodes only: not on SSH hosts yet"
        )
    if any(i.split("@", 1)[0] == "client:isolate" for i in _listed(items)):
        # The client host is not on the hosts' network (clusters/client_net.py).
        raise SpecError(
            "--nemesis client:isolate is not supported on SSH hosts: it runs each client in a "
            "network of its own on the cluster's network, which only Docker clusters give"
        )
    return out


def _listed(items: Any) -> list[str]:
    return items.split(",") if isinstance(items, str) else list(items or ())


def check_named_targets(spec: RunSpec) -> RunSpec:
    """Targets that read what only some runs give, refused where the run gives none. Apart
    from ``validate``, whose items stay valid in any run of the topology: a spec as written
    (options, spec file, campaign cell, stored plan) passes both."""
    if "txn-coordinator" in named_selectors(spec.nemesis) and not WORKLOADS[
        spec.workload
    ].transactional(spec.values()):
        raise SpecError(
            "target txn-coordinator needs transactions: add --txn (queue workload), or aim "
            "at partition-leader or busiest-leader"
        )
    share = sorted(named_selectors(spec.nemesis) & {"share-leader", "share-coordinator"})
    if share and spec.workload != SHARE_WORKLOAD:
        raise SpecError(
            f"target {' and '.join(share)} needs a share group: add --workload share, or aim "
            "at partition-leader"
        )
    return spec
