"""SSH test hosts on this machine: containers of the node image plus an SSH server, on an internal
Docker network of their own, and the inventory (``hosts.yaml``) that reaches them.

Tests cannot reach other machines, so ``kchaos hosts up`` makes machines to reach: each host is a
container that runs sshd (and nothing else until kchaos installs Kafka over SSH), with a fresh
ed25519 host key generated here and written into it before it starts, so known_hosts is written
from the very keys the servers present and host-key verification stays on. A fresh client key
pair is written beside hosts.yaml. This is the only module of the SSH path that talks to Docker:
the cluster on the hosts is brought up, faulted and collected over SSH alone
(clusters/ssh_cluster.py).

The hosts' image derives from the node image (clusters/image.py) with openssh-server and sudo
installed from Debian's mirror; its tag is a hash of the node image's tag and this recipe, so it
is built once, when hosts are first asked for, and again only when either changes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from clusters.cache import cache_dir
from clusters.errors import ClusterError
from clusters.hold import check_name
from clusters.image import ensure_image
from clusters.inventory import TEST_USER, HostEntry, Inventory, dump_inventory
from clusters.topology import check_subnet, host_address

HOSTS_LABEL = "kchaos.hosts"
IMAGE_REPO = os.environ.get("KCHAOS_HOSTS_IMAGE_REPO", "kchaos-sshhost")
PACKAGES = ("openssh-server", "sudo")
TEST_UID = 1000
HOSTS_DIR = "hosts"
INVENTORY_NAME = "hosts.yaml"
CLIENT_KEY = "id_ed25519"
KNOWN_HOSTS = "known_hosts"
READY_TIMEOUT_S = 60.0
# sshd's settings: keys only, root by key only, the one host key written at `hosts up`.
SSHD_CONFIG = """HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
"""
# Fixes what a tar written into a created container cannot promise (owners, modes), then runs
# sshd in the foreground. PID 1 is Docker's init (``init=True``), which reaps the JVMs kchaos
# starts and kills: a killed JVM must not linger as a zombie that still looks alive.
ENTRY = f"""#!/bin/sh
set -e
chown -R {TEST_UID}:{TEST_UID} /home/{TEST_USER}/.ssh
chmod 700 /root/.ssh /home/{TEST_USER}/.ssh
chmod 600 /root/.ssh/authorized_keys /home/{TEST_USER}/.ssh/authorized_keys \\
    /etc/ssh/ssh_host_ed25519_key
mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e
"""
ENTRY_PATH = "/usr/local/sbin/kchaos-sshd"
# Run once in a container of the node image (apt needs Debian's mirror), then committed as the
# hosts' image.
BUILD_SCRIPT = f"""set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends {" ".join(PACKAGES)}
rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
rm -f /etc/ssh/ssh_host_*
useradd -m -u {TEST_UID} -s /bin/sh {TEST_USER}
usermod -p '*' {TEST_USER}
echo '{TEST_USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{TEST_USER}
chmod 440 /etc/sudoers.d/{TEST_USER}
sed -i 's/^session\\s*required\\s*pam_loginuid.so/session optional pam_loginuid.so/' \\
    /etc/pam.d/sshd
mkdir -p /run/sshd /root/.ssh /home/{TEST_USER}/.ssh
"""


def recipe(base_tag: str) -> dict:
    return {
        "base": base_tag,
        "packages": list(PACKAGES),
        "build": BUILD_SCRIPT,
        "entry": ENTRY,
        "sshd": SSHD_CONFIG,
        "format": 1,
    }


def image_tag(base_tag: str) -> str:
    digest = hashlib.sha256(json.dumps(recipe(base_tag), sort_keys=True).encode()).hexdigest()
    return f"{IMAGE_REPO}:{digest[:12]}"


def ensure_hosts_image(client: docker.DockerClient, say: Callable[[str], None] = print) -> str:
    """The hosts' image for the current recipe, built from the node image if missing."""
    base = ensure_image(client, say=say)
    tag = image_tag(base)
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    say(f"building SSH host image {tag} from {base} (openssh-server, sudo from Debian's mirror)")
    # The host's network, as debootstrap has for the node image: apt reaches Debian's mirror
    # whether or not Docker's default bridge has a way out.
    builder = client.containers.create(
        base,
        ["sh", "-c", BUILD_SCRIPT],
        labels={HOSTS_LABEL + ".build": "1"},
        network_mode="host",
    )
    try:
        builder.start()
        result = builder.wait(timeout=600)
        if result.get("StatusCode") != 0:
            tail = builder.logs().decode(errors="replace").strip().splitlines()[-8:]
            raise ClusterError("building the SSH host image failed:\n" + "\n".join(tail))
        _put(
            builder,
            {
                ENTRY_PATH: (ENTRY, 0o755),
                "/etc/ssh/sshd_config.d/kchaos.conf": (SSHD_CONFIG, 0o644),
            },
        )
        repo, _, version = tag.partition(":")
        builder.commit(
            repository=repo,
            tag=version,
            changes=[f'CMD ["{ENTRY_PATH}"]', "LABEL kchaos=1"],
        )
    finally:
        builder.remove(force=True)
    return tag


def _put(
    container, files: dict[str, tuple[str | bytes, int]], owner: dict[str, int] | None = None
) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, (content, mode) in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size = len(data)
            info.mode = mode
            uid = (owner or {}).get(path, 0)
            info.uid = info.gid = uid
            tar.addfile(info, io.BytesIO(data))
    if not container.put_archive("/", buf.getvalue()):
        raise ClusterError(f"could not write {', '.join(files)} into {container.name}")


@dataclass(frozen=True)
class KeyPair:
    private: bytes  # OpenSSH PEM
    public: str  # "ssh-ed25519 AAAA..."


def new_key(comment: str) -> KeyPair:
    """A fresh ed25519 key pair, in the formats sshd and paramiko read."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return KeyPair(private, f"{public.decode()} {comment}")


def known_hosts_line(address: str, port: int, public: str) -> str:
    host = address if port == 22 else f"[{address}]:{port}"
    kind, blob = public.split()[:2]
    return f"{host} {kind} {blob}\n"


def hosts_dir(name: str) -> Path:
    """The hosts' state folder, always directly under the cache's hosts/ (hosts up and down
    remove it whole: a name that is a path must never reach here)."""
    check_name(name, "--name", "name for SSH hosts")
    root = cache_dir() / HOSTS_DIR
    path = root / name
    if path.parent != root or path.resolve().parent != root.resolve():
        raise ClusterError(f"SSH hosts '{name}': their state would not be under {root}")
    return path


def container_name(name: str, host: str) -> str:
    return f"kchaos-{name}-ssh-{host}"


def network_name(name: str) -> str:
    return f"kchaos-{name}-ssh"


def _labelled(client: docker.DockerClient, name: str) -> tuple[list, list]:
    selector = {"label": [f"{HOSTS_LABEL}={name}"]}
    return client.containers.list(all=True, filters=selector), client.networks.list(
        filters=selector
    )


def hosts_up(
    client: docker.DockerClient,
    name: str,
    count: int = 3,
    subnet: str = "10.213.175.0/24",
    user: str = TEST_USER,
    say: Callable[[str], None] = print,
) -> Path:
    """Makes ``count`` SSH hosts (n1, n2, ...; every one broker and controller) and writes their
    inventory; returns the path of hosts.yaml. All or nothing: a failure removes what it made."""
    state = hosts_dir(name)
    if count < 1:
        raise ClusterError("hosts up needs at least one host")
    if user not in ("root", TEST_USER):
        raise ClusterError(f"the test hosts have the users root and {TEST_USER}, not {user}")
    containers, networks = _labelled(client, name)
    if containers or networks:
        raise ClusterError(
            f"SSH hosts named '{name}' exist: 'kchaos hosts down --name {name}' removes them"
        )
    net = check_subnet(subnet, count, "hosts")
    image = ensure_hosts_image(client, say=say)
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    client_key = new_key(f"kchaos-{name}")
    key_path = state / CLIENT_KEY
    key_path.write_bytes(client_key.private)
    key_path.chmod(0o600)
    (state / f"{CLIENT_KEY}.pub").write_text(client_key.public + "\n")
    entries = [
        HostEntry(
            name=f"n{i}",
            address=host_address(net, i - 1),
            roles=frozenset({"broker", "controller"}),
            user=user,
            key=key_path,
        )
        for i in range(1, count + 1)
    ]
    known: list[str] = []
    try:
        _create_network(client, name, subnet)
        for entry in entries:
            host_key = new_key(f"{entry.name}@kchaos-{name}")
            _create_host(client, name, entry, image, client_key, host_key)
            known.append(known_hosts_line(entry.address, entry.port, host_key.public))
        for entry in entries:
            _wait_sshd(entry.address, entry.port)
    except BaseException:
        hosts_down(client, name, say=lambda _: None)
        raise
    (state / KNOWN_HOSTS).write_text("".join(known))
    inventory = Inventory(name, tuple(entries), state / KNOWN_HOSTS)
    path = state / INVENTORY_NAME
    path.write_text(
        f"# SSH test hosts made by 'kchaos hosts up --name {name}'\n"
        + dump_inventory(inventory, state)
    )
    say(f"{count} SSH hosts up on {subnet} ({', '.join(e.address for e in entries)}), user {user}")
    return path


def hosts_down(client: docker.DockerClient, name: str, say: Callable[[str], None] = print) -> int:
    """Removes the hosts' containers and network and their inventory, keys and known_hosts."""
    state = hosts_dir(name)
    containers, networks = _labelled(client, name)
    removed = 0
    for c in containers:
        try:
            c.remove(force=True)
            removed += 1
        except docker.errors.NotFound:
            pass
    for n in networks:
        try:
            n.remove()
            removed += 1
        except docker.errors.NotFound:
            pass
    if state.exists():
        shutil.rmtree(state)
    say(f"SSH hosts '{name}': removed {removed} containers and networks")
    return removed


def _create_network(client: docker.DockerClient, name: str, subnet: str) -> None:
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=subnet)])
    try:
        client.networks.create(
            network_name(name),
            driver="bridge",
            # No egress: the hosts reach each other, and this machine reaches them (port 22, and
            # Kafka's ports for the clients), as a Docker cluster's nodes.
            internal=True,
            ipam=ipam,
            labels={HOSTS_LABEL: name},
        )
    except docker.errors.APIError as exc:
        text = str(exc.explanation or exc)
        raise ClusterError(
            f"cannot create network {network_name(name)} ({subnet}): {text}"
        ) from None


def _create_host(
    client: docker.DockerClient,
    name: str,
    entry: HostEntry,
    image: str,
    client_key: KeyPair,
    host_key: KeyPair,
) -> None:
    api = client.api
    net = network_name(name)
    host_config = api.create_host_config(
        network_mode=net,
        # iptables and tc in the host's own network namespace, as on a real machine.
        cap_add=["NET_ADMIN"],
        init=True,
    )
    networking = api.create_networking_config(
        {net: api.create_endpoint_config(ipv4_address=entry.address, aliases=[entry.name])}
    )
    created = api.create_container(
        image,
        name=container_name(name, entry.name),
        hostname=entry.name,
        labels={HOSTS_LABEL: name, f"{HOSTS_LABEL}.host": entry.name},
        host_config=host_config,
        networking_config=networking,
    )
    container = client.containers.get(created["Id"])
    authorized = client_key.public + "\n"
    user_keys = f"/home/{TEST_USER}/.ssh/authorized_keys"
    _put(
        container,
        {
            "/etc/ssh/ssh_host_ed25519_key": (host_key.private, 0o600),
            "/etc/ssh/ssh_host_ed25519_key.pub": (host_key.public + "\n", 0o644),
            "/root/.ssh/authorized_keys": (authorized, 0o600),
            user_keys: (authorized, 0o600),
        },
        owner={user_keys: TEST_UID},
    )
    api.start(created["Id"])


def _wait_sshd(address: str, port: int, timeout: float = READY_TIMEOUT_S) -> None:
    """Until the host's sshd sends its banner (the SSH path then proves the key and login)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=2) as s:
                s.settimeout(2)
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise ClusterError(f"sshd on {address}:{port} did not answer within {timeout:.0f} s ({last})")
