"""An SSH inventory (``hosts.yaml``): which machines a cluster runs on, how to reach each, what
role each plays, and where kchaos puts its files there.

Pure data, read and written here and nowhere else, so that ``kchaos hosts up`` (which writes one
for its own test hosts) and every command that takes ``--hosts`` agree on the format; docs/ssh.md
describes it. Nothing here connects anywhere.

```yaml
cluster: sshit                 # the cluster's name: its hold, and results
known_hosts: known_hosts       # relative to this file; default ~/.ssh/known_hosts
accept_new_host_keys: false    # true: a host missing from known_hosts is added (and said)
defaults:                      # any host field, for every host that does not say otherwise
  user: kchaos
  key: id_ed25519              # a private key file (relative to this file), or agent: true
hosts:
  - name: n1
    address: 10.213.175.11
    role: broker,controller
```
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from clusters.errors import ClusterError
from clusters.hold import name_problem
from clusters.topology import NodeSpec, Topology

ROLES = ("broker", "controller", "zookeeper")
DEFAULT_INSTALL_DIR = "/opt/kchaos"
DEFAULT_DATA_DIR = "/var/lib/kchaos"
DEFAULT_INTERFACE = "eth0"
DEFAULT_CLUSTER = "kchaos-ssh"
# The non-root user of the project's own test hosts (``kchaos hosts``, clusters/ssh_hosts.py),
# with passwordless sudo: the path real hosts usually take.
TEST_USER = "kchaos"
# What Topology.subnet holds for hosts: they are where they are, on no subnet kchaos made.
SSH_SUBNET = "ssh"
# Node names end up in file names and in the hold's: the same rule as cluster names
# (clusters/hold.py name_problem). A user name as useradd takes it; a host directory in words
# a remote shell reads as one word.
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_PATH = re.compile(r"/[A-Za-z0-9_.+@/-]*")
# Kafka's node.id is a non-negative Java int.
MAX_NODE_ID = 2**31 - 1
# More hosts than any cluster kchaos runs (and a bound on the work of checking a file).
MAX_HOSTS = 256
HOST_KEYS = (
    "name",
    "address",
    "port",
    "user",
    "key",
    "agent",
    "role",
    "node_id",
    "install_dir",
    "data_dir",
    "interface",
)
TOP_KEYS = ("cluster", "known_hosts", "accept_new_host_keys", "defaults", "hosts")


@dataclass(frozen=True)
class HostEntry:
    """One machine of the inventory."""

    name: str
    address: str
    roles: frozenset[str]
    port: int = 22
    user: str = "root"
    # A private key file; None: the SSH agent (and ~/.ssh's default keys).
    key: Path | None = None
    agent: bool = False
    node_id: int | None = None
    install_dir: str = DEFAULT_INSTALL_DIR
    data_dir: str = DEFAULT_DATA_DIR
    # The device the host's cluster traffic leaves by (the packet nemesis shapes it).
    interface: str = DEFAULT_INTERFACE

    @property
    def sudo(self) -> bool:
        """Commands run under ``sudo -n`` unless the user is root."""
        return self.user != "root"


@dataclass(frozen=True)
class Inventory:
    cluster: str
    hosts: tuple[HostEntry, ...]
    known_hosts: Path
    accept_new_host_keys: bool = False
    # Where the file was read from (relative paths in it are relative to its directory).
    path: Path | None = field(default=None, compare=False)

    def host(self, name: str) -> HostEntry:
        for h in self.hosts:
            if h.name == name:
                return h
        raise ClusterError(f"no host '{name}' in the inventory: hosts are {self.names()}")

    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def topology(self) -> Topology:
        """The cluster's shape, from the hosts' roles: kraft-combined (every host both broker
        and controller), kraft (controllers and brokers apart) or zk (ZooKeepers and brokers).
        Node ids are the hosts' own ``node_id``, else their place in the inventory, 1 on."""
        kind = topology_kind([h.roles for h in self.hosts])
        nodes = tuple(
            NodeSpec(
                name=h.name,
                roles=h.roles,
                node_id=h.node_id if h.node_id is not None else i,
                ip=h.address,
            )
            for i, h in enumerate(self.hosts, start=1)
        )
        return Topology(kind=kind, cluster=self.cluster, subnet=SSH_SUBNET, nodes=nodes)


def topology_kind(roles: list[frozenset[str]]) -> str:
    both = frozenset({"broker", "controller"})
    if roles and all(r == both for r in roles):
        return "kraft-combined"
    for kind, other in (("kraft", "controller"), ("zk", "zookeeper")):
        apart = (frozenset({"broker"}), frozenset({other}))
        if all(r in apart for r in roles) and all(any(r == a for r in roles) for a in apart):
            return kind
    raise ClusterError(
        "the hosts' roles make no topology kchaos runs: every host broker,controller "
        "(kraft-combined); controllers and brokers on separate hosts (kraft); or zookeeper and "
        "broker hosts (zk)"
    )


def _roles(value: Any, where: str) -> frozenset[str]:
    if isinstance(value, str):
        items = [r.strip() for r in value.split(",") if r.strip()]
    elif isinstance(value, list) and all(isinstance(r, str) for r in value):
        items = [r.strip() for r in value]
    else:
        raise ClusterError(f"{where}: role must be a list or a comma-separated string")
    unknown = [r for r in items if r not in ROLES]
    if unknown or not items:
        raise ClusterError(
            f"{where}: unknown role {', '.join(unknown) or '(none)'}: roles are {', '.join(ROLES)}"
        )
    return frozenset(items)


def _absolute_dir(value: Any, key: str, where: str) -> str:
    if (
        not isinstance(value, str)
        or not PurePosixPath(value).is_absolute()
        or not _PATH.fullmatch(value)
    ):
        raise ClusterError(
            f"{where}: {key} must be an absolute path on the host (letters, digits, '_', '.', "
            f"'-', '+', '@', '/'), not {value!r}"
        )
    text = str(PurePosixPath(value))
    if text == "/":
        raise ClusterError(f"{where}: {key} must not be /")
    return text


def _address(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ClusterError(f"{where}: address is missing")
    try:
        # Kafka's listeners and the partition rules name hosts by address: an IP, not a name
        # that could resolve differently here and on the hosts.
        address = ipaddress.IPv4Address(value)
    except ValueError:
        raise ClusterError(f"{where}: address must be an IPv4 address, not {value!r}") from None
    if address.is_unspecified or address.is_multicast or address.is_reserved:
        raise ClusterError(
            f"{where}: address {value} is not one host's (0.0.0.0, multicast and 240.0.0.0/4 "
            "are not): give the host's IPv4 address"
        )
    return str(address)


class _Problems:
    """Every problem an inventory has, each its own sentence (one line each), found before
    anything is connected to; raised together as one ClusterError."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def check(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except ClusterError as exc:
            self.found.append(str(exc))
            return None

    def add(self, text: str) -> None:
        self.found.append(text)

    def raise_any(self) -> None:
        if self.found:
            raise ClusterError("\n".join(self.found))


def _host(raw: Any, defaults: dict[str, Any], base: Path, index: int) -> HostEntry:
    """One host, every field checked; ClusterError with a line per problem."""
    where = f"hosts[{index}]"
    if not isinstance(raw, dict):
        raise ClusterError(f"{where}: expected a mapping of host fields")
    values = {**defaults, **raw}
    problems = _Problems()
    unknown = sorted(set(values) - set(HOST_KEYS), key=str)
    if unknown:
        problems.add(
            f"{where}: unknown field {', '.join(map(str, unknown))}: fields are "
            f"{', '.join(HOST_KEYS)}"
        )
    name = values.get("name")
    bad_name = name_problem(name)
    if bad_name:
        problems.add(f"{where}: name {name!r} is not a host name: {bad_name}")
    else:
        where = f"host {name}"
    address = problems.check(_address, values.get("address"), where)
    roles = None
    if "role" not in values:
        problems.add(f"{where}: role is missing (broker, controller, zookeeper)")
    else:
        roles = problems.check(_roles, values["role"], where)
    port = values.get("port", 22)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        problems.add(f"{where}: port must be a TCP port (1..65535), not {port!r}")
    user = values.get("user", "root")
    if not isinstance(user, str) or not _USER.fullmatch(user):
        problems.add(
            f"{where}: user must be a user name (a letter or '_', then letters, digits, '_', "
            f"'.' or '-', at most 32), not {user!r}"
        )
    key = values.get("key")
    agent = values.get("agent", key is None)
    if not isinstance(agent, bool):
        problems.add(f"{where}: agent must be true or false")
    key_path = None
    if key is not None:
        if not isinstance(key, str) or not key or "\0" in key:
            problems.add(f"{where}: key must be a file name")
        else:
            key_path = (base / Path(key).expanduser()).resolve()
    node_id = values.get("node_id")
    if node_id is not None and (
        isinstance(node_id, bool) or not isinstance(node_id, int) or not 0 <= node_id <= MAX_NODE_ID
    ):
        problems.add(
            f"{where}: node_id must be a whole number from 0 to {MAX_NODE_ID} (Kafka's node.id), "
            f"not {node_id!r}"
        )
    interface = values.get("interface", DEFAULT_INTERFACE)
    if not isinstance(interface, str) or not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", interface):
        problems.add(f"{where}: interface must be a network device name, not {interface!r}")
    install_dir = problems.check(
        _absolute_dir, values.get("install_dir", DEFAULT_INSTALL_DIR), "install_dir", where
    )
    data_dir = problems.check(
        _absolute_dir, values.get("data_dir", DEFAULT_DATA_DIR), "data_dir", where
    )
    problems.raise_any()
    return HostEntry(
        name=name,
        address=address,
        roles=roles,
        port=port,
        user=user,
        key=key_path,
        agent=agent,
        node_id=node_id,
        install_dir=install_dir,
        data_dir=data_dir,
        interface=interface,
    )


def parse_inventory(data: Any, base: Path, path: Path | None = None) -> Inventory:
    """An inventory from its YAML mapping; relative paths are relative to ``base``. Every
    problem is found before any is raised: one ClusterError, a line per problem."""
    if not isinstance(data, dict):
        raise ClusterError("an inventory is a mapping with a 'hosts' list")
    problems = _Problems()
    unknown = sorted(set(data) - set(TOP_KEYS), key=str)
    if unknown:
        problems.add(f"unknown key {', '.join(map(str, unknown))}: keys are {', '.join(TOP_KEYS)}")
    cluster = data.get("cluster", DEFAULT_CLUSTER)
    bad_cluster = name_problem(cluster)
    if bad_cluster:
        problems.add(f"cluster {cluster!r} is not a cluster name: {bad_cluster}")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        problems.add("defaults must be a mapping of host fields")
        defaults = {}
    if "name" in defaults or "address" in defaults:
        problems.add("defaults cannot give a name or an address: each host has its own")
        defaults = {k: v for k, v in defaults.items() if k not in ("name", "address")}
    raw_hosts = data.get("hosts")
    hosts: list[HostEntry] = []
    if not isinstance(raw_hosts, list) or not raw_hosts:
        problems.add("hosts must be a non-empty list")
    else:
        if len(raw_hosts) > MAX_HOSTS:
            problems.add(f"hosts: {len(raw_hosts)} hosts; an inventory holds at most {MAX_HOSTS}")
        for i, raw in enumerate(raw_hosts[:MAX_HOSTS]):
            host = problems.check(_host, raw, defaults, base, i)
            if host is not None:
                hosts.append(host)
    for what in ("name", "address"):
        seen: set[str] = set()
        for h in hosts:
            value = getattr(h, what)
            if value in seen:
                problems.add(f"two hosts have the {what} {value}")
            seen.add(value)
    ids = [h.node_id for h in hosts if h.node_id is not None]
    if len(ids) != len(set(ids)):
        problems.add("two hosts have the same node_id")
    known = data.get("known_hosts")
    known_hosts = Path("~/.ssh/known_hosts").expanduser()
    if isinstance(known, str) and known and "\0" not in known:
        known_hosts = (base / Path(known).expanduser()).resolve()
    elif known is not None:
        problems.add("known_hosts must be a file name")
    accept = data.get("accept_new_host_keys", False)
    if not isinstance(accept, bool):
        problems.add("accept_new_host_keys must be true or false")
    problems.raise_any()
    inventory = Inventory(cluster, tuple(hosts), known_hosts, accept, path)
    inventory.topology()  # refuses roles that make no topology
    return inventory


def load_inventory(path: str | Path) -> Inventory:
    """Reads ``hosts.yaml``; every problem is one ClusterError naming the file."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClusterError(f"{p}: cannot read the inventory: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ClusterError(f"{p}: not valid YAML ({exc})") from None
    try:
        return parse_inventory(data, p.resolve().parent, p.resolve())
    except ClusterError as exc:
        # Each problem its own line, each naming the file.
        raise ClusterError("\n".join(f"{p}: {line}" for line in str(exc).splitlines())) from None


def dump_inventory(inventory: Inventory, base: Path) -> str:
    """The YAML text of an inventory, paths relative to ``base`` where they lie under it."""

    def rel(p: Path) -> str:
        try:
            return str(p.relative_to(base))
        except ValueError:
            return str(p)

    defaults = {f.name: f.default for f in fields(HostEntry) if f.name in HOST_KEYS}
    hosts = []
    for h in inventory.hosts:
        entry: dict[str, Any] = {
            "name": h.name,
            "address": h.address,
            "role": ",".join(sorted(h.roles)),
        }
        for key in ("port", "user", "agent", "node_id", "install_dir", "data_dir", "interface"):
            value = getattr(h, key)
            if value != defaults.get(key):
                entry[key] = value
        if h.key is not None:
            entry["key"] = rel(h.key)
        hosts.append(entry)
    data = {
        "cluster": inventory.cluster,
        "known_hosts": rel(inventory.known_hosts),
        "accept_new_host_keys": inventory.accept_new_host_keys,
        "hosts": hosts,
    }
    return yaml.safe_dump(data, sort_keys=False)
