"""The disk layer: a FUSE filesystem under a node's data directory that keeps what no fsync made
durable and, on command, drops it (a power loss), fails operations or corrupts files
(docs/disk.md).

The program, ``kchaos-disk`` (C++ over libfuse3's low-level API, clusters/native/kchaos_disk/),
is compiled on this host by setup into the cache, one directory per digest of its sources, and
mounted read-only into the nodes that ask for it, as the JVM agents are; libfuse is linked in
statically, so the node image needs nothing new. A node runs on the layer when its
configuration has ``Layout.disk_layer_script``: its entrypoint runs that script (which mounts
the layer over the data directory, the backing files under ``Layout.disk_state_dir``) before
anything touches the data. Without it a node runs on the plain directory, as always.

Everything the layer answers is one JSON line (``control`` builds the command a node runs,
``answer`` reads what it printed, ``ask`` does both on a node).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from clusters.cache import cache_dir
from clusters.capabilities import Exec
from clusters.errors import ClusterError
from clusters.layout import IMAGE_LAYOUT, Layout
from clusters.topology import NodeSpec

SOURCES = Path(__file__).with_name("native") / "kchaos_disk"
PROGRAM = "kchaos-disk"
SELFTEST = "kchaos-disk-selftest"
CONTROL_SOCKET = "/run/kchaos-disk.sock"
# The label of a Docker node whose data runs on the layer (its value: the name mode).
DOCKER_LABEL = "kchaos.disk-layer"
# Which fsync makes a create, unlink or rename durable (docs/disk.md): "journal" as ext4's
# ordered journal (any fsync commits every name change before it), "strict" as POSIX (an fsync
# of the directory that changed).
NAME_MODES = ("journal", "strict")
# The longest periodic writeback the program takes (its --writeback).
MAX_WRITEBACK_S = 86_400
# The program's own sources; the selftest is built beside it from the pure parts.
LAYER_SOURCES = ("main.cpp", "layer.cpp", "control.cpp", "file_state.cpp", "names.cpp",
                 "protocol.cpp", "writeback.cpp", "kafka_batches.cpp")  # fmt: skip
SELFTEST_SOURCES = ("selftest.cpp", "file_state.cpp", "names.cpp", "protocol.cpp",
                    "kafka_batches.cpp")  # fmt: skip
CXXFLAGS = ("-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror")
# libfuse3 and the C++ runtime linked in: the node image (Debian bookworm, like the host that
# builds it) brings only glibc.
LINK = ("-Wl,-Bstatic", "-lfuse3", "-Wl,-Bdynamic", "-static-libstdc++", "-static-libgcc",
        "-lpthread", "-ldl")  # fmt: skip
FUSE_INCLUDE = "/usr/include/fuse3"
# Debian's packages the build needs (clusters/engine.py HOST_PACKAGES installs them).
BUILD_PACKAGES = ("g++", "libfuse3-dev")


class DiskLayerError(ClusterError):
    """The layer cannot be built, or a node's layer did not do what it was asked; one line."""


class NoAnswer(DiskLayerError):
    """Nothing came back from the control command (seen once under load: the command ran, its
    output did not arrive), so whether the layer did it is unknown."""


def digest() -> str:
    """One digest over every source, header and the flags: a change to any rebuilds."""
    h = hashlib.sha256()
    for src in sorted(SOURCES.iterdir()):
        if src.suffix in (".cpp", ".hpp"):
            h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    h.update(" ".join(CXXFLAGS + LINK).encode())
    return h.hexdigest()[:12]


def layer_dir() -> Path:
    """Where this source's program lives on the host (what nodes mount at ``disk_dir``)."""
    return cache_dir() / "disk-layer" / digest()


def _compile(sources: tuple[str, ...], out: Path, link: tuple[str, ...]) -> None:
    cxx = shutil.which("g++")
    if cxx is None:
        raise DiskLayerError(
            f"the disk layer needs g++ and libfuse3-dev: 'kchaos setup' installs them "
            f"(apt-get install {' '.join(BUILD_PACKAGES)})"
        )
    cmd = [cxx, *CXXFLAGS, f"-I{FUSE_INCLUDE}", "-o", str(out)]
    cmd += [str(SOURCES / s) for s in sources] + list(link)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        hint = ""
        if "fuse_lowlevel.h" in proc.stderr or "-lfuse3" in proc.stderr:
            hint = " (is libfuse3-dev installed? 'kchaos setup' installs it)"
        raise DiskLayerError(f"the disk layer did not compile{hint}: " + " | ".join(tail))


def ensure_layer(say: Callable[[str], None] = print) -> Path:
    """The directory holding ``kchaos-disk`` for the current sources, built on first use (setup
    builds it; a run that asks for the layer on a machine set up before it builds it then)."""
    out = layer_dir()
    if (out / PROGRAM).exists():
        return out
    say(f"building the disk layer ({PROGRAM}) into {out}")
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _compile(LAYER_SOURCES, tmp / PROGRAM, LINK)
        # Another process may have built the same sources first: its program is the same.
        with contextlib.suppress(OSError):
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def build_selftest(out: Path) -> Path:
    """The checks of the layer's pure parts and bookkeeping (selftest.cpp), built into ``out``:
    they need g++ only, no libfuse and no mount."""
    exe = out / SELFTEST
    _compile(SELFTEST_SOURCES, exe, ())
    return exe


@dataclass(frozen=True)
class Mount:
    """Where a node's layer is mounted and keeps its backing files."""

    mountpoint: str
    state_dir: str


def mount_of(node: NodeSpec, layout: Layout = IMAGE_LAYOUT) -> Mount:
    """A ZooKeeper node's data directory, or the directory holding a Kafka node's log
    directories (the metadata log lives in them): the parent, so that a re-provisioned
    controller's ``rm -rf`` of its data directory acts inside the layer, not on its mountpoint."""
    if node.is_zookeeper:
        return Mount(layout.zk_data_dir, layout.disk_state_dir)
    return Mount(str(PurePosixPath(layout.data_dir).parent), layout.disk_state_dir)


def backing_path(node: NodeSpec, path: str, layout: Layout = IMAGE_LAYOUT) -> str:
    """Where a path under the node's mountpoint is kept: the same bytes as through the mount
    (the layer writes through at once), and there whether or not the node runs (its mount
    ends with its process). A path outside the mountpoint is itself."""
    m = mount_of(node, layout)
    if path == m.mountpoint or path.startswith(m.mountpoint + "/"):
        return f"{m.state_dir}/root{path[len(m.mountpoint) :]}"
    return path


def mount_script(
    node: NodeSpec,
    names: str = NAME_MODES[0],
    writeback_s: float | None = None,
    layout: Layout = IMAGE_LAYOUT,
) -> str:
    """``Layout.disk_layer_script``'s text: the layer mounted before the node prepares its data
    (sourced by the entrypoint under ``set -e``: a layer that cannot mount stops the node with
    its reason in the log). ``writeback_s``: what has been pending that long becomes durable
    (None: only an fsync makes anything durable)."""
    if names not in NAME_MODES:
        raise DiskLayerError(f"unknown name mode '{names}': choose one of {', '.join(NAME_MODES)}")
    writeback = ""
    if writeback_s is not None:
        if not 0 <= writeback_s <= MAX_WRITEBACK_S:
            raise DiskLayerError(f"writeback {writeback_s:g} s: 0 to {MAX_WRITEBACK_S} seconds")
        writeback = f" --writeback {writeback_s:g}"
    m = mount_of(node, layout)
    return (
        "# kchaos's disk layer (docs/disk.md): the data directory through kchaos-disk, which\n"
        "# keeps what no fsync made durable.\n"
        f"{layout.disk_dir}/{PROGRAM} mount --state {m.state_dir} --control {CONTROL_SOCKET} "
        f"--names {names}{writeback} {m.mountpoint}\n"
    )


def control(*words: str, layout: Layout = IMAGE_LAYOUT) -> list[str]:
    """The command that sends one control command (``status``, ``drop``, ``fail write
    ENOSPC``...) to a node's layer."""
    if not words:
        raise DiskLayerError("no control command given")
    for word in words:
        if not word or any(c.isspace() for c in word):
            raise DiskLayerError(f"a control word is empty or has a space in it: {word!r}")
    return [f"{layout.disk_dir}/{PROGRAM}", "ctl", "--control", CONTROL_SOCKET, *words]


def answer(stdout: str, node: str = "node") -> dict[str, Any]:
    """The layer's one-line answer; DiskLayerError with its error (or with what came instead of
    an answer) when it is not ok."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("ok"), bool):
        shown = line[:200] if line else "nothing"
        raise NoAnswer(f"{node}: the disk layer gave no answer (it printed {shown!r})")
    if not value["ok"]:
        raise DiskLayerError(f"{node}: disk layer: {value.get('error', 'failed, no reason')}")
    return value


def ask(node: Exec, *words: str, timeout: float = 60.0) -> dict[str, Any]:
    """Sends a control command to the node's layer and returns its answer (raises
    DiskLayerError when the layer refuses or is not there)."""
    result = node.exec(control(*words), timeout=timeout)
    try:
        return answer(result.stdout or result.stderr, node.name)
    except NoAnswer as exc:
        raise NoAnswer(f"{exc} (exit code {result.exit_code})") from None


def batches(
    node: Exec, files: dict[str, int], layout: Layout = IMAGE_LAYOUT, timeout: float = 120.0
) -> list[dict[str, Any]]:
    """What ``kchaos-disk batches`` says of Kafka segment files (PATH under the mountpoint, as
    ``status`` names it -> the byte length from which on a batch counts as lost), read from
    the layer's backing directory in the node: per file ``path``, ``from``, ``size``,
    ``batches``, ``lost`` and, when some are, their ``first`` and ``last`` offsets; ``error``
    (and ``walked_to``) where the walk stopped early. DiskLayerError when the program does not
    answer."""
    if not files:
        return []
    words = [w for path, length in files.items() for w in (path, str(int(length)))]
    root = f"{mount_of(node.spec, layout).state_dir}/root"
    result = node.exec(
        [f"{layout.disk_dir}/{PROGRAM}", "batches", "--root", root, *words], timeout=timeout
    )
    return list(answer(result.stdout or result.stderr, node.name).get("files", []))
