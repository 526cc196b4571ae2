"""The disk layer's pure parts: its C++ bookkeeping (selftest.cpp, over plain files in a temporary
directory, no mount), the program building, and the Python side (the control command, its
answers, the mount script and where nodes run it). The layer mounted in a node is
tests/integration/test_disk_layer.py's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from clusters import disk_layer
from clusters.config import render_node
from clusters.disk_layer import (
    DiskLayerError,
    answer,
    backing_path,
    control,
    ensure_layer,
    mount_of,
    mount_script,
)
from clusters.kafka_dist import KafkaDist
from clusters.layout import IMAGE_LAYOUT
from clusters.topology import build_topology
from harness.spec import RunSpec, SpecError, validate

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
needs_fuse_headers = pytest.mark.skipif(
    not Path(disk_layer.FUSE_INCLUDE, "fuse_lowlevel.h").exists(),
    reason="libfuse3-dev is not installed",
)


@needs_gxx
def test_the_layers_bookkeeping_passes_its_selftest(tmp_path: Path) -> None:
    exe = disk_layer.build_selftest(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([str(exe), str(work)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("checks, 0 failed")


@needs_gxx
@needs_fuse_headers
def test_the_program_builds_once_per_source_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    said: list[str] = []
    out = ensure_layer(say=said.append)
    assert out == tmp_path / "disk-layer" / disk_layer.digest()
    assert (out / disk_layer.PROGRAM).stat().st_mode & 0o111
    # libfuse is inside: the node image brings only glibc.
    ldd = subprocess.run(["ldd", str(out / disk_layer.PROGRAM)], capture_output=True, text=True)
    assert "libfuse3" not in ldd.stdout and "libstdc++" not in ldd.stdout
    assert ensure_layer(say=said.append) == out
    assert len(said) == 1  # the second call found it built
    usage = subprocess.run([str(out / disk_layer.PROGRAM)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: kchaos-disk mount" in usage.stderr


@needs_gxx
@needs_fuse_headers
def test_ctl_without_a_layer_answers_one_json_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    program = ensure_layer(say=lambda _: None) / disk_layer.PROGRAM
    sock = tmp_path / "none.sock"
    proc = subprocess.run(
        [str(program), "ctl", "--control", str(sock), "status"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    with pytest.raises(DiskLayerError, match=r"n1: disk layer: no disk layer answers on .*none"):
        answer(proc.stdout, "n1")


def test_control_sends_words_to_the_nodes_socket() -> None:
    assert control("fail", "write", "ENOSPC", "data") == [
        "/opt/kchaos/disk/kchaos-disk",
        "ctl",
        "--control",
        "/run/kchaos-disk.sock",
        "fail",
        "write",
        "ENOSPC",
        "data",
    ]
    for bad in ((), ("corrupt flip", "x"), ("",)):
        with pytest.raises(DiskLayerError):
            control(*bad)


def test_answers_are_read_or_refused_in_one_line() -> None:
    ok = answer('{"ok":true,"dropped_bytes":12,"files":[]}\n', "n1")
    assert ok["dropped_bytes"] == 12
    with pytest.raises(DiskLayerError, match=r"^n2: disk layer: unknown command 'x'"):
        answer('{"ok":false,"error":"unknown command \'x\'"}', "n2")
    for garbage in ("", "OCI runtime exec failed: no such file", "[1]", '{"ok": 1}'):
        with pytest.raises(DiskLayerError, match=r"^n3: the disk layer gave no answer"):
            answer(garbage, "n3")


def test_kafka_nodes_mount_above_their_log_dirs_and_zookeeper_on_its_data() -> None:
    topo = build_topology("zk", cluster="c", zookeepers=1)
    zk = next(n for n in topo.nodes if n.is_zookeeper)
    broker = next(n for n in topo.nodes if n.is_broker)
    assert mount_of(zk).mountpoint == IMAGE_LAYOUT.zk_data_dir
    # The parent: a re-provisioned controller's rm -rf of its data dir acts inside the layer.
    assert mount_of(broker).mountpoint == "/var/lib/kafka"
    assert IMAGE_LAYOUT.data_dir.startswith(mount_of(broker).mountpoint + "/")
    # What collection reads of a node on the layer: the backing directory, mount or no mount.
    assert backing_path(broker, f"{IMAGE_LAYOUT.data_dir}/__cluster_metadata-0") == (
        f"{IMAGE_LAYOUT.disk_state_dir}/root/data/__cluster_metadata-0"
    )
    assert backing_path(zk, IMAGE_LAYOUT.zk_data_dir) == f"{IMAGE_LAYOUT.disk_state_dir}/root"
    assert backing_path(broker, "/var/lib/kafka-other/x") == "/var/lib/kafka-other/x"
    assert backing_path(broker, "/etc/kafka/server.properties") == "/etc/kafka/server.properties"
    script = mount_script(broker, "strict")
    assert "--names strict /var/lib/kafka\n" in script
    assert f"--state {IMAGE_LAYOUT.disk_state_dir} " in script
    with pytest.raises(DiskLayerError, match="unknown name mode 'lazy'"):
        mount_script(broker, "lazy")
    assert "--names journal --writeback 30 /var/lib/kafka\n" in mount_script(broker, "journal", 30)
    with pytest.raises(DiskLayerError, match="writeback -1 s"):
        mount_script(broker, "journal", -1)


def test_the_entrypoint_mounts_the_layer_before_it_touches_the_data() -> None:
    classes = {"kafka": "kafka.Kafka", "storage": "kafka.tools.StorageTool"}
    dist = KafkaDist(version="3.9.1", home=Path("/cache/3.9.1"), classes=classes)
    topo = build_topology("kraft-combined", cluster="c")
    node = topo.nodes[0]
    entry = render_node(topo, node, dist, "fast", "cid").files["/etc/kafka/entrypoint.sh"]
    lines = entry.splitlines()
    mount = lines.index(
        f"if [ -f {IMAGE_LAYOUT.disk_layer_script} ]; then . {IMAGE_LAYOUT.disk_layer_script}; fi"
    )
    assert mount == 2  # right after "set -e": before mkdir, the wipe and the format
    assert all(IMAGE_LAYOUT.data_dir not in line for line in lines[:mount])


def test_the_run_option_is_stored_only_when_asked() -> None:
    assert "disk_layer" not in RunSpec().to_dict()
    assert RunSpec(disk_layer="journal").to_dict()["disk_layer"] == "journal"
    with pytest.raises(SpecError, match="sometimes"):
        validate(RunSpec(disk_layer="sometimes"))
