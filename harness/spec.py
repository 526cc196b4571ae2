"""What a run is asked to do: options from the command line or a spec file, checked in one place.

A spec is plain data so that it can be written into the run directory and read back for a replay;
every problem with one becomes a single SpecError sentence naming the field.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from clusters.errors import ClusterError
from clusters.kafka_dist import parse_version, resolve_version
from clusters.quorum import STATIC, check_quorum
from clusters.topology import DEFAULT_SUBNET, TOPOLOGIES, build_topology, check_zookeeper_version
from clusters.upgrade_paths import check_downgrade, check_upgrade
from history.format import JVM_RECORDER
from nemesis.items import ItemError, named_selectors, parse_items
from steps.feature_steps import FeatureItem, FeatureSpecError, parse_features
from workloads.client_choice import CLIENTS, GROUP_PROTOCOLS, JAVA, ClientChoiceError
from workloads.client_choice import check as check_client
from workloads.pipelined import SEND_RECORDERS

TIMINGS = ("fast", "default")
QUEUE_MODES = ("assign", "subscribe")
AVAILABILITY = ("report", "fail")  # the first is what a run without the option does
SEND_MODES = ("sync", "async")  # the first is what a run without the option does


class SpecError(Exception):
    """A spec (file or options) that cannot be run; the message is the whole story."""


@dataclass
class RunSpec:
    workload: str = "queue"
    topology: str = "kraft-combined"
    # ZooKeeper ensemble size in zk mode: 3 lets a nemesis take its leader without losing ZK.
    zookeepers: int = 1
    version: str = "3.9"
    nemesis: list[str] = field(default_factory=list)
    time_limit: float = 30.0
    concurrency: int = 4
    rate: float = 50.0  # total invocations per second across clients; 0: as fast as they can
    nemesis_interval: float = 10.0
    timing: str = "default"
    seed: int | None = None
    name: str | None = None  # results/<name>/; defaults to the workload
    keep_cluster: bool = False
    # Where the run's Docker cluster lives; several runs (or tests) can coexist with their own.
    cluster: str = "kchaos-run"
    subnet: str = DEFAULT_SUBNET
    results_dir: str = "results"
    # Workload shape (queue): how many keys, and how consumers find their partitions.
    keys: int = 8
    txn: bool = False
    mode: str = "assign"
    final_timeout: float = 60.0
    # Rolling software changes (harness/upgrade.py): the release to upgrade to after the start
    # (and after a migration), and the release to roll back to after a safe feature downgrade.
    upgrade_to: str | None = None
    downgrade_to: str | None = None
    # The controller quorum (clusters/quorum.py): static (None), dynamic (KIP-853, with
    # controller membership steps, harness/quorum_steps.py), or static-to-dynamic (4.1+).
    quorum: str | None = None
    # What a spurious fence of a healthy broker does to the verdict (checkers/metadata_log/
    # liveness.py): reported and tolerated (None, "report"), or a failure ("fail").
    availability: str | None = None
    # Pipelined sends (workloads/pipelined.py): "async" makes each worker slot one producer with
    # `in_flight` sends outstanding at once, each its own operation; None or "sync": one send
    # at a time per process, as every earlier run. The rest tune the async producer only.
    send_mode: str | None = None
    in_flight: int | None = None
    linger_ms: float | None = None
    batch_size: int | None = None
    # Who writes pipelined sends' operations (workloads/pipelined.py SEND_RECORDERS): with the
    # Java client its JVM ("jvm", what None means there), else the harness's recorder.
    send_recorder: str | None = None
    # Feature steps of the user's own (harness/feature_steps.py): "transaction.version=0,
    # dry-run:group.version=0, metadata.version=release:4.0, ...", each one planned step.
    features: str | None = None
    # The client the queue drives (workloads/client_choice.py): librdkafka (None) or Kafka's own
    # Java client, from the jars of `client_version` (None: the release the run starts on); the
    # subscribers' group protocol (KIP-848 "consumer", or "classic" as every earlier run); the
    # transaction protocol the cluster is formatted with (transaction.version 0 or 2).
    client: str | None = None
    client_version: str | None = None
    group_protocol: str | None = None
    txn_protocol: str | None = None
    # An SSH inventory (clusters/inventory.py, docs/ssh.md): the run's cluster is brought up on
    # its hosts instead of Docker, and takes their name and topology. None: Docker.
    hosts: str | None = None

    @property
    def run_name(self) -> str:
        return self.name or self.workload

    def releases(self) -> list[str]:
        """Every Kafka release the run starts on or rolls to, first the one it starts on."""
        return [v for v in (self.version, self.upgrade_to, self.downgrade_to) if v]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        # Options added later appear only when used, so every earlier plan.json stays the same.
        for name in _LATER_OPTIONS:
            if out[name] is None:
                del out[name]
        # Asking for the static quorum is asking for what every earlier run had.
        if out.get("quorum") == STATIC:
            del out["quorum"]
        # The same for availability findings reported, as every earlier run had them.
        if out.get("availability") == AVAILABILITY[0]:
            del out["availability"]
        if out.get("send_mode") == SEND_MODES[0]:
            del out["send_mode"]
        if out.get("client") == CLIENTS[0]:
            del out["client"]
        if out.get("group_protocol") == GROUP_PROTOCOLS[0]:
            del out["group_protocol"]
        return out

    @property
    def quorum_mode(self) -> str:
        return self.quorum or STATIC


_LATER_OPTIONS = (
    "upgrade_to",
    "downgrade_to",
    "quorum",
    "availability",
    "send_mode",
    "in_flight",
    "linger_ms",
    "batch_size",
    "send_recorder",
    "features",
    "client",
    "client_version",
    "group_protocol",
    "txn_protocol",
    "hosts",
)


def check_release(version: str) -> None:
    """Refuses, without a network, what a run's version resolution would refuse of ``version``
    itself: a spelling that is no version, or a release older than kchaos supports, in the
    run's own words. Which release a line such as 3.9 means, and whether Maven Central has
    it, only the run finds out (clusters/kafka_dist.py resolve_offline_first)."""
    parts = parse_version(version)
    # Given the one release the request could mean, resolve_version refuses only the request.
    resolve_version(version, [".".join(map(str, (*parts, 0, 0)[:3]))])


def feature_items(spec: RunSpec) -> list[FeatureItem]:
    """The spec's own feature steps; they run after every roll, so on the release the run ends
    on (the downgrade's, else the upgrade's, else the one it starts on)."""
    if not spec.features:
        return []
    return parse_features(spec.features, spec.releases()[-1], spec.topology)


def _known_workloads() -> list[str]:
    from workloads.registry import WORKLOADS

    return list(WORKLOADS)


def validate(spec: RunSpec) -> RunSpec:
    """Raises SpecError on the first thing that cannot work; returns the spec unchanged."""
    workloads = _known_workloads()
    if spec.workload not in workloads:
        raise SpecError(
            f"unknown workload '{spec.workload}': valid workloads are {', '.join(workloads)}"
        )
    if spec.topology not in TOPOLOGIES:
        choices = ", ".join(TOPOLOGIES)
        raise SpecError(f"unknown topology '{spec.topology}': choose one of {choices}")
    try:
        parse_items(spec.nemesis, spec.topology, spec.zookeepers)
    except ItemError as exc:
        raise SpecError(str(exc)) from None
    try:
        for release in spec.releases():
            check_release(release)
        check_zookeeper_version(spec.topology, spec.version)
        if spec.upgrade_to:
            check_upgrade(spec.topology, spec.version, spec.upgrade_to)
        if spec.downgrade_to:
            check_downgrade(spec.topology, spec.version, spec.downgrade_to, spec.upgrade_to)
        if spec.quorum is not None:
            check_quorum(spec.quorum, spec.topology, spec.releases())
    except ClusterError as exc:
        raise SpecError(str(exc)) from None
    if spec.features is not None:
        try:
            feature_items(spec)
        except (FeatureSpecError, ClusterError) as exc:
            raise SpecError(str(exc)) from None
    if spec.availability is not None and spec.availability not in AVAILABILITY:
        raise SpecError(
            f"unknown availability '{spec.availability}': choose one of {', '.join(AVAILABILITY)}"
        )
    _check_send_mode(spec)
    try:
        if spec.client_version is not None:
            check_release(spec.client_version)
        check_client(
            client=spec.client,
            client_version=spec.client_version,
            group_protocol=spec.group_protocol,
            txn_protocol=spec.txn_protocol,
            workload=spec.workload,
            mode=spec.mode,
            txn=spec.txn,
            topology=spec.topology,
            releases=spec.releases(),
        )
    except ClientChoiceError as exc:
        raise SpecError(str(exc)) from None
    except ClusterError as exc:
        raise SpecError(f"client-version: {exc}") from None
    if spec.zookeepers not in (1, 3):
        raise SpecError(f"zookeepers must be 1 or 3, not {spec.zookeepers}")
    if spec.timing not in TIMINGS:
        raise SpecError(f"unknown timing '{spec.timing}': choose one of {', '.join(TIMINGS)}")
    if spec.mode not in QUEUE_MODES:
        raise SpecError(f"unknown queue mode '{spec.mode}': choose one of {', '.join(QUEUE_MODES)}")
    positive = {
        "time_limit": spec.time_limit,
        "concurrency": spec.concurrency,
        "nemesis_interval": spec.nemesis_interval,
        "keys": spec.keys,
        "final_timeout": spec.final_timeout,
    }
    for name, value in positive.items():
        if value <= 0:
            raise SpecError(f"{name.replace('_', '-')} must be positive, not {value}")
    if spec.rate < 0:
        raise SpecError(f"rate must be 0 (unlimited) or positive, not {spec.rate}")
    if spec.seed is not None and not 0 <= spec.seed < 2**63:
        raise SpecError(f"seed must be between 0 and 2^63-1, not {spec.seed}")
    try:
        # The cluster's layout is pure data: a subnet that cannot hold it is refused here, as
        # the run would refuse it, and not after the run directory exists.
        build_topology(
            spec.topology, cluster=spec.cluster, zookeepers=spec.zookeepers, subnet=spec.subnet
        )
    except ClusterError as exc:
        raise SpecError(str(exc)) from None
    return spec


def _check_send_mode(spec: RunSpec) -> None:
    if spec.send_mode is not None and spec.send_mode not in SEND_MODES:
        raise SpecError(
            f"unknown send mode '{spec.send_mode}': choose one of {', '.join(SEND_MODES)}"
        )
    tuning = {
        "in_flight": spec.in_flight,
        "linger_ms": spec.linger_ms,
        "batch_size": spec.batch_size,
        "send_recorder": spec.send_recorder,
    }
    if spec.send_mode != "async":
        given = [k.replace("_", "-") for k, v in tuning.items() if v is not None]
        if given:
            raise SpecError(f"{', '.join(given)} only apply with send-mode async")
        return
    if spec.workload != "queue":
        raise SpecError(f"send-mode async is a queue option, not one of '{spec.workload}'")
    if spec.in_flight is not None and spec.in_flight <= 0:
        raise SpecError(f"in-flight must be positive, not {spec.in_flight}")
    if spec.linger_ms is not None and spec.linger_ms < 0:
        raise SpecError(f"linger-ms must be 0 or positive, not {spec.linger_ms:g}")
    if spec.batch_size is not None and spec.batch_size <= 0:
        raise SpecError(f"batch-size must be positive, not {spec.batch_size}")
    if spec.send_recorder is not None:
        if spec.send_recorder not in SEND_RECORDERS:
            raise SpecError(
                f"unknown send recorder '{spec.send_recorder}': choose one of "
                f"{', '.join(SEND_RECORDERS)}"
            )
        if spec.client != JAVA:
            raise SpecError(
                "send-recorder applies to --client java (librdkafka's sends are "
                "recorded by the harness)"
            )
        if spec.txn and spec.send_recorder == JVM_RECORDER:
            raise SpecError(
                "send-recorder jvm records pipelined sends, not transactions: with --txn each "
                "txn op spans its sends and its commit, and the harness records it"
            )


# Fields whose default is None, so their type cannot be read off the default.
_OPTIONAL_KINDS: dict[str, type] = {
    "seed": int,
    "name": str,
    "upgrade_to": str,
    "downgrade_to": str,
    "quorum": str,
    "availability": str,
    "send_mode": str,
    "in_flight": int,
    "linger_ms": float,
    "batch_size": int,
    "send_recorder": str,
    "features": str,
    "client": str,
    "client_version": str,
    "group_protocol": str,
    "txn_protocol": str,
    "hosts": str,
}


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Spec-file values into the field's type, with a sentence when they do not fit."""
    if name == "nemesis":
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise SpecError("nemesis must be a comma-separated string or a list of names")
    if value is None:
        return None
    kind = type(default) if default is not None else _OPTIONAL_KINDS[name]
    if kind is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{name} must be true or false, not {value!r}")
        return value
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f"{name} must be a number, not {value!r}")
        if kind is int and value != int(value):
            raise SpecError(f"{name} must be a whole number, not {value!r}")
        return kind(value)
    if not isinstance(value, str):
        raise SpecError(f"{name} must be a string, not {value!r}")
    return value


def spec_from_dict(data: Any, where: str = "spec") -> RunSpec:
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping of options, found {type(data).__name__}")
    defaults = RunSpec()
    known = {f.name for f in fields(RunSpec)}
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key not in known:
            raise SpecError(
                f"{where}: unknown option '{raw_key}': options are "
                f"{', '.join(sorted(k.replace('_', '-') for k in known))}"
            )
        try:
            values[key] = _coerce(key, value, getattr(defaults, key))
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
    try:
        if values.get("hosts"):
            values.update(_on_hosts(values, defaults))
        return check_named_targets(validate(RunSpec(**values)))
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a YAML or JSON spec file (JSON is YAML, but its errors read better)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{p}: cannot read spec file: {exc.strerror or exc}") from None
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
        given = values.get(key, getattr(defaults, key))
        if given not in (getattr(defaults, key), theirs):
            raise SpecError(
                f"{key} {given!r}: a run on the hosts of {values['hosts']} has theirs ({theirs!r})"
            )
        out[key] = theirs
    if values.get("quorum") not in (None, STATIC):
        # Controller membership steps re-provision a controller the way the node image takes
        # it (harness/quorum_steps.py).
        raise SpecError("--quorum dynamic and static-to-dynamic are not supported on SSH hosts yet")
    return out


def check_named_targets(spec: RunSpec) -> RunSpec:
    """Targets that read what only some runs give, refused where the run gives none. Apart
    from ``validate``, whose items stay valid in any run of the topology: a spec as written
    (options, spec file, campaign cell, stored plan) passes both."""
    if "txn-coordinator" in named_selectors(spec.nemesis) and not (
        spec.txn and spec.workload == "queue"
    ):
        raise SpecError(
            "target txn-coordinator needs transactions: add --txn (queue workload), or aim "
            "at partition-leader or busiest-leader"
        )
    return spec
