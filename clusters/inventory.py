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
# Node names end up in file names and in the hold's; the same rule as cluster names.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
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
    if not isinstance(value, str) or not PurePosixPath(value).is_absolute():
        raise ClusterError(f"{where}: {key} must be an absolute path on the host, not {value!r}")
    text = str(PurePosixPath(value))
    if text == "/":
        raise ClusterError(f"{where}: {key} must not be /")
    return text


def _host(raw: Any, defaults: dict[str, Any], base: Path, index: int) -> HostEntry:
    where = f"hosts[{index}]"
    if not isinstance(raw, dict):
        raise ClusterError(f"{where}: expected a mapping of host fields")
    values = {**defaults, **raw}
    unknown = sorted(set(values) - set(HOST_KEYS))
    if unknown:
        raise ClusterError(
            f"{where}: unknown field {', '.join(unknown)}: fields are {', '.join(HOST_KEYS)}"
        )
    name = values.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ClusterError(f"{where}: name must be letters, digits, '_', '.' or '-', not {name!r}")
    where = f"host {name}"
    address = values.get("address")
    if not isinstance(address, str) or not address:
        raise ClusterError(f"{where}: address is missing")
    try:
        # Kafka's listeners and the partition rules name hosts by address: an IP, not a name
        # that could resolve differently here and on the hosts.
        address = str(ipaddress.IPv4Address(address))
    except ValueError:
        raise ClusterError(f"{where}: address must be an IPv4 address, not {address!r}") from None
    if "role" not in values:
        raise ClusterError(f"{where}: role is missing (broker, controller, zookeeper)")
    port = values.get("port", 22)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ClusterError(f"{where}: port must be a TCP port, not {port!r}")
    user = values.get("user", "root")
    if not isinstance(user, str) or not user:
        raise ClusterError(f"{where}: user must be a user name")
    key = values.get("key")
    agent = values.get("agent", key is None)
    if not isinstance(agent, bool):
        raise ClusterError(f"{where}: agent must be true or false")
    key_path = None
    if key is not None:
        if not isinstance(key, str):
            raise ClusterError(f"{where}: key must be a file name")
        key_path = (base / Path(key).expanduser()).resolve()
    node_id = values.get("node_id")
    if node_id is not None and (isinstance(node_id, bool) or not isinstance(node_id, int)):
        raise ClusterError(f"{where}: node_id must be a whole number")
    interface = values.get("interface", DEFAULT_INTERFACE)
    if not isinstance(interface, str) or not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", interface):
        raise ClusterError(f"{where}: interface must be a network device name, not {interface!r}")
    return HostEntry(
        name=name,
        address=address,
        roles=_roles(values["role"], where),
        port=port,
        user=user,
        key=key_path,
        agent=agent,
        node_id=node_id,
        install_dir=_absolute_dir(
            values.get("install_dir", DEFAULT_INSTALL_DIR), "install_dir", where
        ),
        data_dir=_absolute_dir(values.get("data_dir", DEFAULT_DATA_DIR), "data_dir", where),
        interface=interface,
    )


def parse_inventory(data: Any, base: Path, path: Path | None = None) -> Inventory:
    """An inventory from its YAML mapping; relative paths are relative to ``base``."""
    if not isinstance(data, dict):
        raise ClusterError("an inventory is a mapping with a 'hosts' list")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ClusterError(f"unknown key {', '.join(unknown)}: keys are {', '.join(TOP_KEYS)}")
    cluster = data.get("cluster", DEFAULT_CLUSTER)
    if not isinstance(cluster, str) or not _NAME.match(cluster):
        raise ClusterError(f"cluster must be a name of letters, digits, '_', '.', '-': {cluster!r}")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ClusterError("defaults must be a mapping of host fields")
    if "name" in defaults or "address" in defaults:
        raise ClusterError("defaults cannot give a name or an address: each host has its own")
    raw_hosts = data.get("hosts")
    if not isinstance(raw_hosts, list) or not raw_hosts:
        raise ClusterError("hosts must be a non-empty list")
    hosts = tuple(_host(raw, defaults, base, i) for i, raw in enumerate(raw_hosts))
    for what in ("name", "address"):
        seen: set[str] = set()
        for h in hosts:
            value = getattr(h, what)
            if value in seen:
                raise ClusterError(f"two hosts have the {what} {value}")
            seen.add(value)
    ids = [h.node_id for h in hosts if h.node_id is not None]
    if len(ids) != len(set(ids)):
        raise ClusterError("two hosts have the same node_id")
    known = data.get("known_hosts")
    if known is None:
        known_hosts = Path("~/.ssh/known_hosts").expanduser()
    elif isinstance(known, str):
        known_hosts = (base / Path(known).expanduser()).resolve()
    else:
        raise ClusterError("known_hosts must be a file name")
    accept = data.get("accept_new_host_keys", False)
    if not isinstance(accept, bool):
        raise ClusterError("accept_new_host_keys must be true or false")
    inventory = Inventory(cluster, hosts, known_hosts, accept, path)
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
        raise ClusterError(f"{p}: {exc}") from None


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
