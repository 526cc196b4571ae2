"""Kafka clusters on the hosts of an SSH inventory: the handle ``kchaos cluster --hosts``, ``run
--hosts`` and ``heal --hosts`` hold.

What Docker's labels are for a container, a small state file is for a host
(``<install_dir>/cluster.json``: the cluster's name, topology, version, timing, cluster id and
the supervisor its JVM runs under), written when the cluster comes up and removed when it goes
down; the inventory says which hosts to ask. So a crashed kchaos leaves nothing that ``cluster
down --hosts`` or ``heal --hosts`` cannot find again.

Bringing a cluster up: every host is checked first (it answers, sudo works without a password,
the commands kchaos runs there exist), the Kafka release's jars and the JVM agents are installed
once per host and release (one tar sent by SFTP, about 50 MB, skipped when the host has it:
a marker holds a digest of what was sent), the directories kchaos owns there are emptied, the
configuration rendered by clusters/config.py for the host's layout is written, and every JVM is
started under the host's supervisor; then readiness as on Docker (clusters/readiness.py). Up is
all or nothing: a failure removes what it did, the installed jars excepted.

Nothing here imports Docker (tests/unit/clusters/test_imports.py holds that).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from clusters import config as node_config
from clusters.cluster import ClusterInfo, UpOptions
from clusters.collect import collect_cluster, keep_node_logs
from clusters.errors import ClusterError
from clusters.inventory import HostEntry, Inventory
from clusters.kafka_dist import KafkaDist, agents_dir, ensure_dist, load_dist
from clusters.readiness import wait_ready
from clusters.ssh_node import (
    UNIT,
    UNIT_PATH,
    HostPaths,
    SshNode,
    has_systemd_script,
    read_state,
    unit_text,
)
from clusters.ssh_session import SshSession
from clusters.topology import Topology, check_zookeeper_version
from history import strict_json

INSTALLED_MARKER = ".kchaos-installed"
# What kchaos runs on a host, besides the JVM: a host without one of them is refused up front.
NEEDED_COMMANDS = (
    "java",
    "tar",
    "setsid",
    "iptables",
    "iptables-restore",
    "tc",
    "find",
    "install",
    "sed",
    "timeout",
)
T = TypeVar("T")


def _on_hosts(hosts: list[Any], fn: Callable[[Any], T]) -> list[T]:
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        return list(pool.map(fn, hosts))


def dist_files(dist: KafkaDist) -> list[tuple[Path, str]]:
    """What a host needs of a release (its jars and dist.json, under ``dist/``) and of the JVM
    agents (under ``agents/``): (file here, name in the tar)."""
    files = [(dist.home / "dist.json", "dist/dist.json")]
    files += [(p, f"dist/libs/{p.name}") for p in sorted(dist.libs.iterdir()) if p.is_file()]
    files += [(p, f"agents/{p.name}") for p in sorted(agents_dir().glob("*.jar"))]
    return files


def dist_digest(files: list[tuple[Path, str]]) -> str:
    """Names and sizes of what is sent: a release's jars never change once assembled, so this
    tells a complete install of the same files from anything else."""
    h = hashlib.sha256()
    for path, name in files:
        h.update(f"{name}\0{path.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


class SshCluster:
    """The cluster on an inventory's hosts: SSH's ``ClusterHandle`` (clusters/cluster.py)."""

    def __init__(self, inventory: Inventory, say: Callable[[str], None] = print) -> None:
        self.inventory = inventory
        self.cluster = inventory.cluster
        self.say = say
        # The release whose tools read the cluster's files, when not the one it was created with.
        self.tools: KafkaDist | None = None
        self._sessions: dict[str, SshSession] = {}
        self._supervisors: dict[str, str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SshCluster({self.cluster}: {', '.join(self.inventory.names())})"

    def session(self, host: HostEntry) -> SshSession:
        with self._lock:
            s = self._sessions.get(host.name)
            if s is None:
                inv = self.inventory
                s = SshSession(host, inv.known_hosts, inv.accept_new_host_keys, self.say)
                self._sessions[host.name] = s
            return s

    def close(self) -> None:
        for s in list(self._sessions.values()):
            s.close()

    def cli_option(self) -> str:
        return f"--hosts {self._where()}"

    def fixed_topology(self, quorum: str = "static") -> Topology:
        """The inventory's hosts and roles make the topology: a run on them takes it."""
        return self._topology(quorum)

    def says_removed(self, error: BaseException | None) -> str | None:
        """Nothing: an error over SSH does not tell a removed cluster from an unreachable host
        (``missing`` asks the hosts' state files instead)."""
        return None

    # What the hosts say ------------------------------------------------------------------------
    def _states(self) -> dict[str, dict[str, Any] | None]:
        def one(host: HostEntry) -> dict[str, Any] | None:
            raw = read_state(self.session(host), host)
            if raw is None:
                return None
            try:
                data = json.loads(raw)
            except ValueError:
                raise ClusterError(
                    f"host {host.name}: its {HostPaths(host).state} is not JSON"
                ) from None
            return data if isinstance(data, dict) else None

        hosts = list(self.inventory.hosts)
        return dict(zip((h.name for h in hosts), _on_hosts(hosts, one), strict=True))

    def exists(self) -> bool:
        """Whether any host of the inventory is part of a cluster kchaos brought up."""
        return any(s is not None for s in self._states().values())

    def info(self) -> ClusterInfo:
        states = self._states()
        found = {name: s for name, s in states.items() if s is not None}
        if not found:
            raise ClusterError(
                f"no cluster '{self.cluster}' is up on the hosts of {self._where()}: start one "
                "with 'kchaos cluster up --hosts'"
            )
        first = next(iter(found.values()))
        for name, s in found.items():
            if s.get("cluster") != self.cluster or s.get("cluster_id") != first.get("cluster_id"):
                raise ClusterError(
                    f"host {name} is part of cluster '{s.get('cluster')}' "
                    f"({s.get('cluster_id')}), not of this inventory's '{self.cluster}' "
                    f"({first.get('cluster_id')}): 'kchaos cluster down --hosts' of the "
                    "inventory that made it removes it"
                )
        topo = self._topology(first.get("quorum", "static"))
        if first.get("topology") != topo.kind:
            raise ClusterError(
                f"the hosts run a {first.get('topology')} cluster, and the inventory's roles say "
                f"{topo.kind}"
            )
        with self._lock:
            self._supervisors.update({n: s.get("supervisor", "pidfile") for n, s in found.items()})
        return ClusterInfo(
            topology=topo,
            version=str(first["version"]),
            timing=str(first["timing"]),
            cluster_id=str(first["cluster_id"]),
        )

    def missing(self, info: ClusterInfo) -> str | None:
        """What of the cluster as it came up is no longer on its hosts (None: all of it is, or
        the hosts cannot be asked, which proves no removal)."""
        try:
            states = self._states()
        except ClusterError:
            return None
        gone = [
            name
            for name, state in states.items()
            if state is None or state.get("cluster_id") != info.cluster_id
        ]
        return f"hosts {', '.join(gone)} no longer hold it" if gone else None

    def _topology(self, quorum: str = "static") -> Topology:
        topo = self.inventory.topology()
        return Topology(topo.kind, topo.cluster, topo.subnet, topo.nodes, quorum=quorum)

    def _where(self) -> str:
        path = self.inventory.path
        return str(path) if path is not None else f"inventory '{self.cluster}'"

    def node(self, host: HostEntry, supervisor: str | None = None) -> SshNode:
        spec = self.inventory.topology().node(host.name)
        with self._lock:
            chosen = supervisor or self._supervisors.get(host.name)
        if chosen is None:
            self.info()
            with self._lock:
                chosen = self._supervisors.get(host.name, "pidfile")
        return SshNode(self.session(host), spec, host, chosen)

    def nodes(self, info: ClusterInfo | None = None) -> dict[str, SshNode]:
        with self._lock:
            known = len(self._supervisors) == len(self.inventory.hosts)
        if info is None or not known:
            self.info()  # learns each host's supervisor from its state file
        return {h.name: self.node(h) for h in self.inventory.hosts}

    def dist(self, info: ClusterInfo) -> KafkaDist:
        if self.tools is not None:
            return self.tools
        return load_dist(info.version) or ensure_dist(info.version)

    # Up -----------------------------------------------------------------------------------------
    def up(
        self, topo: Topology | None, options: UpOptions, say: Callable[[str], None] = print
    ) -> ClusterInfo:
        """Installs and starts Kafka on every host and waits until the cluster is ready.
        ``topo``: the run's topology, which must be the inventory's (None: the inventory's);
        ``options.features``: feature levels the KRaft nodes are formatted with
        (--txn-protocol); ``logs_on_failure``: where each node's log goes if it fails, before
        the removal."""
        version, timing, heap_mb = options.version, options.timing, options.heap_mb
        extra_props = dict(options.extra_props) if options.extra_props is not None else None
        features = dict(options.features) if options.features is not None else None
        logs_on_failure = options.logs_on_failure
        node_config.check_timing(timing)
        own = self._topology(topo.quorum if topo is not None else "static")
        if topo is not None:
            _check_same(topo, own)
        if own.migration:
            raise ClusterError("a migration topology is not supported on SSH hosts yet")
        if options.disk_layer is not None:
            raise ClusterError("the disk layer is not supported on SSH hosts yet")
        check_zookeeper_version(own.kind, version)
        if self.exists():
            raise ClusterError(
                f"a cluster is up on the hosts of {self._where()} already: 'kchaos cluster down "
                "--hosts' removes it"
            )
        dist = ensure_dist(version)
        if own.zookeepers and not dist.line.zookeeper:
            raise ClusterError(
                f"Kafka {dist.version} has no ZooKeeper mode: a zk topology needs 3.x"
            )
        hosts = list(self.inventory.hosts)
        supervisors = dict(
            zip(self.inventory.names(), _on_hosts(hosts, self._preflight), strict=True)
        )
        info = ClusterInfo(own, dist.version, timing, node_config.new_cluster_id())
        try:
            self._install(hosts, dist, say)
            with self._lock:
                self._supervisors.update(supervisors)
            nodes = {h.name: self.node(h, supervisors[h.name]) for h in hosts}
            _on_hosts(
                hosts,
                lambda h: self._provision(
                    nodes[h.name], info, dist, heap_mb, extra_props, features
                ),
            )
            _on_hosts(list(nodes.values()), lambda n: n.start())
            say(
                f"started {len(hosts)} nodes of Kafka {dist.version} ({own.kind}) over SSH "
                f"({', '.join(f'{n.name} {n.supervisor}' for n in nodes.values())})"
            )
            if options.wait:
                wait_ready(self, info, timeout=options.ready_timeout)
        except BaseException:
            # A half-made cluster is worse than none, as on Docker; its logs are kept first.
            if logs_on_failure is not None:
                keep_node_logs(self, info, logs_on_failure, say)
            try:
                self.remove()
            except ClusterError as exc:
                say(f"warning: removing the half-made cluster failed: {exc}")
            raise
        return info

    def _preflight(self, host: HostEntry) -> str:
        """Checks that the host can take a node; returns the supervisor its JVM will run under."""
        session = self.session(host)
        if host.sudo:
            code, _, err = session.run(["true"], timeout=20)
            if code != 0:
                raise ClusterError(
                    f"host {host.name}: sudo -n failed for {host.user} ({err.decode().strip()}): "
                    "kchaos runs its commands as root there and needs passwordless sudo "
                    "(docs/ssh.md)"
                )
        script = " ".join(f"command -v {c} >/dev/null || echo {c};" for c in NEEDED_COMMANDS)
        code, out, err = session.run(["sh", "-c", script], timeout=30)
        missing = out.decode().split()
        if code != 0 or missing:
            raise ClusterError(
                f"host {host.name} lacks {', '.join(missing) or err.decode().strip()}: install "
                "them (docs/ssh.md lists what a host needs)"
            )
        code, _, _ = session.run(has_systemd_script(), timeout=20)
        return "systemd" if code == 0 else "pidfile"

    def install_releases(self, dists: list[KafkaDist], say: Callable[[str], None] = print) -> None:
        """Every release a run rolls its nodes to, on every host that lacks it (the node image
        sees every assembled release; a host has only what was installed)."""
        for dist in dists:
            self._install(list(self.inventory.hosts), dist, say)

    def _install(self, hosts: list[HostEntry], dist: KafkaDist, say: Callable[[str], None]) -> None:
        """The release's jars and the agents on every host that lacks them: one tar by SFTP."""
        files = dist_files(dist)
        digest = dist_digest(files)
        need = [h for h in hosts if not self._installed(h, dist, digest)]
        if not need:
            return
        with tempfile.TemporaryDirectory(prefix="kchaos-ssh-") as tmp:
            tarball = Path(tmp) / "dist.tar"
            with tarfile.open(tarball, "w") as tar:
                for path, name in files:
                    tar.add(path, arcname=name)
            size = tarball.stat().st_size / 1e6
            say(
                f"installing Kafka {dist.version} ({size:.0f} MB) on "
                f"{', '.join(h.name for h in need)} by SFTP"
            )
            _on_hosts(need, lambda h: self._send_dist(h, dist, tarball, digest))

    def _installed(self, host: HostEntry, dist: KafkaDist, digest: str) -> bool:
        layout = SshNode(self.session(host), self._spec(host), host).layout
        marker = f"{layout.dists_dir}/{dist.version}/{INSTALLED_MARKER}"
        code, out, _ = self.session(host).run(["cat", marker], timeout=20)
        return code == 0 and out.decode().strip() == digest

    def _spec(self, host: HostEntry):
        return self.inventory.topology().node(host.name)

    def _send_dist(self, host: HostEntry, dist: KafkaDist, tarball: Path, digest: str) -> None:
        node = SshNode(self.session(host), self._spec(host), host)
        layout = node.layout
        with tarball.open("rb") as f:
            staged = node.stage(f)
        incoming = f"{host.install_dir}/.incoming-{uuid.uuid4().hex[:8]}"
        target = f"{layout.dists_dir}/{dist.version}"
        q = shlex.quote
        # Unpacked beside, then moved in whole: a host never has half a release in place.
        script = (
            f"set -e; mkdir -p {q(incoming)} {q(layout.dists_dir)} {q(layout.agents_dir)}; "
            f"tar -xf {q(staged)} -C {q(incoming)}; "
            f"cp -f {q(incoming)}/agents/* {q(layout.agents_dir)}/; "
            f"echo {digest} > {q(incoming)}/dist/{INSTALLED_MARKER}; "
            f"rm -rf {q(target)}; mv {q(incoming)}/dist {q(target)}; "
            f"chmod -R a+rX {q(target)} {q(layout.agents_dir)}; "
            f"rm -rf {q(incoming)} {q(staged)}"
        )
        result = node.exec(["sh", "-c", script], timeout=600)
        if not result.ok:
            node.exec(["rm", "-rf", incoming, staged], timeout=60)
            raise ClusterError(
                f"host {host.name}: installing Kafka {dist.version} failed: {result.stderr.strip()}"
            )

    def _provision(
        self,
        node: SshNode,
        info: ClusterInfo,
        dist: KafkaDist,
        heap_mb: int,
        extra: dict[str, str] | None,
        features: dict[str, int] | None = None,
    ) -> None:
        """Empties the directories kchaos owns on the host, writes the node's configuration,
        its supervisor's unit (systemd) and the cluster's state file."""
        layout, paths = node.layout, node.paths
        owned = [
            layout.conf_dir,
            layout.data_dir,
            layout.zk_data_dir,
            paths.run_dir,
            paths.logs_dir,
        ]
        result = node.exec(["rm", "-rf", *owned, paths.state], timeout=120)
        if not result.ok:
            raise ClusterError(
                f"node {node.name}: could not empty its directories: {result.stderr}"
            )
        cfg = node_config.render_node(
            info.topology,
            node.spec,
            dist,
            info.timing,
            info.cluster_id,
            heap_mb,
            extra=extra,
            features=features,
            layout=layout,
        )
        node.put_files(cfg.files)
        if node.supervisor == "systemd":
            entry = f"{layout.conf_dir}/entrypoint.sh"
            node.put_file(UNIT_PATH, unit_text(node.name, self.cluster, entry, paths.log))
            reload = node.exec(["systemctl", "daemon-reload"], timeout=60)
            if not reload.ok:
                raise ClusterError(f"node {node.name}: systemctl daemon-reload failed")
        state = {
            "cluster": self.cluster,
            "topology": info.topology.kind,
            "quorum": info.topology.quorum,
            "version": info.version,
            "timing": info.timing,
            "cluster_id": info.cluster_id,
            "supervisor": node.supervisor,
            "node": node.name,
        }
        node.put_file(paths.state, strict_json.dumps(state, indent=2) + "\n")

    # Down ---------------------------------------------------------------------------------------
    def down(self, collect: Path | None = None, say: Callable[[str], None] = print) -> int:
        """Collects into ``collect`` (if given and a cluster is there), then removes it. Faults
        are the nemeses' to undo first (the harness heals before it calls this): a host's
        iptables chains and qdiscs, unlike a container's, outlive its node."""
        if collect is not None and self.exists():
            collect_cluster(self, collect, say=say)
        return self.remove()

    def remove(self) -> int:
        """Stops every JVM and removes what the cluster put on the hosts (configuration, data,
        logs, state, the systemd unit); the installed releases stay. Returns how many hosts had
        something to remove."""

        def one(host: HostEntry) -> bool:
            node = SshNode(self.session(host), self._spec(host), host, "pidfile")
            layout, paths = node.layout, node.paths
            had = node.exec(["test", "-e", paths.state], timeout=20).ok
            for supervisor in ("systemd", "pidfile"):
                node.supervisor = supervisor
                try:
                    if supervisor == "systemd" and not node.exec(["test", "-e", UNIT_PATH]).ok:
                        continue
                    node.stop(timeout=0)
                except ClusterError:
                    pass
            q = shlex.quote
            script = (
                f"if [ -e {UNIT_PATH} ]; then systemctl stop {UNIT} 2>/dev/null; "
                f"rm -f {UNIT_PATH}; systemctl daemon-reload 2>/dev/null; fi; "
                "rm -rf "
                + " ".join(
                    q(p)
                    for p in (
                        layout.conf_dir,
                        layout.data_dir,
                        layout.zk_data_dir,
                        paths.run_dir,
                        paths.logs_dir,
                        paths.state,
                    )
                )
            )
            result = node.exec(["sh", "-c", script], timeout=300)
            if not result.ok:
                raise ClusterError(f"host {host.name}: removal failed: {result.stderr.strip()}")
            return had

        removed = sum(_on_hosts(list(self.inventory.hosts), one))
        with self._lock:
            self._supervisors.clear()
        return removed


def _check_same(topo: Topology, own: Topology) -> None:
    """A run's topology must be the hosts': the same kind and the same nodes."""
    theirs = [(n.name, n.roles, n.ip) for n in topo.nodes]
    ours = [(n.name, n.roles, n.ip) for n in own.nodes]
    if topo.kind != own.kind or theirs != ours:
        raise ClusterError(
            f"the run asks for a {topo.kind} cluster of {', '.join(n.name for n in topo.nodes)}, "
            f"and the inventory's hosts make a {own.kind} cluster of "
            f"{', '.join(n.name for n in own.nodes)}: a run on hosts takes their topology"
        )
