"""The disk layer for real: mounted in one node container (no Kafka), written to with and
without fsync, powered off (drop, then the container killed and started again as a power loss
does), and read back; its fail rules and a corruption seen through the mount; and a short run
of kchaos on a cluster whose nodes run on it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import docker.errors
import pytest

from clusters.disk_layer import DOCKER_LABEL, DiskLayerError, ask, ensure_layer, mount_script
from clusters.docker_node import DockerNode
from clusters.image import ensure_image
from clusters.layout import IMAGE_LAYOUT
from clusters.topology import NodeSpec
from history.reader import read_history
from tests.integration.runs import quiet_run

CONTAINER = "kchaos-disk-layer-it"
NAME, SUBNET = "disk-layer-it", "10.213.204.0/24"
SPEC = NodeSpec(name="n1", roles=frozenset({"broker", "controller"}), node_id=1, ip="10.0.0.1")
DATA = "/var/lib/kafka/data"


def _remove(docker_client: Any) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        docker_client.containers.get(CONTAINER).remove(force=True)


@pytest.fixture
def node(docker_client) -> Iterator[DockerNode]:
    """A node-image container whose command mounts the layer (as a node's entrypoint does)
    and then waits: started again, it mounts the layer again over what the backing holds."""
    _remove(docker_client)
    script = mount_script(SPEC).strip().splitlines()[-1]
    docker_client.containers.run(
        ensure_image(docker_client, say=lambda m: None),
        ["/bin/sh", "-c", f"{script} && mkdir -p {DATA} && exec sleep 3600"],
        name=CONTAINER,
        detach=True,
        network_mode="none",
        labels={"kchaos": "1", DOCKER_LABEL: "journal"},
        devices=["/dev/fuse:/dev/fuse:rwm"],
        cap_add=["SYS_ADMIN"],
        volumes={
            str(ensure_layer(say=lambda m: None)): {"bind": IMAGE_LAYOUT.disk_dir, "mode": "ro"}
        },
    )
    n = DockerNode(docker_client, CONTAINER, SPEC)
    _until_mounted(n)
    yield n
    _remove(docker_client)


def _until_mounted(n: DockerNode) -> None:
    for _ in range(100):
        if n.exec(["test", "-d", DATA]).ok and ask(n, "ping")["ok"]:
            return
    raise AssertionError("the layer did not come up")


def sh(n: DockerNode, script: str) -> str:
    result = n.exec(["sh", "-c", script], timeout=60)
    assert result.ok, f"{script}: {result.stdout}{result.stderr}"
    return result.stdout


def power_off(n: DockerNode) -> dict[str, Any]:
    """What a power loss does: the unsynced writes go, and so do the processes."""
    dropped = ask(n, "drop")
    n.kill()
    return dropped


def power_cycle(n: DockerNode) -> dict[str, Any]:
    dropped = power_off(n)
    n.start()
    _until_mounted(n)
    return dropped


def test_a_power_loss_keeps_what_was_fsynced_and_drops_the_rest(node: DockerNode) -> None:
    # `sync FILE` fsyncs the file (coreutils); `dd conv=fsync` writes and then fsyncs.
    sh(
        node,
        f"cd {DATA} && printf 'durable' > kept && sync kept && printf ' and more' >> kept && "
        "printf 'gone' > new && mkdir sub && "
        "dd if=/dev/zero of=sub/big bs=64k count=16 2>/dev/null && "
        "printf 'synced' > sub/synced && dd if=sub/synced of=sub/copy conv=fsync 2>/dev/null",
    )
    status = ask(node, "status")
    pending = {f["path"]: f for f in status["files"]}
    assert pending["data/kept"]["durable_size"] == 7 and pending["data/kept"]["size"] == 16
    assert pending["data/sub/big"]["bytes"] == 1 << 20
    assert "data/sub/copy" not in pending  # fsynced

    dropped = power_off(node)
    # Collection reads a dead node's files where the layer kept them.
    assert node.get_file(f"{DATA}/kept") == b"durable"
    node.start()
    _until_mounted(node)
    assert dropped["powered"] is False and dropped["errors"] == 0
    by_path = {f["path"]: f for f in dropped["files"]}
    assert by_path["data/kept"]["bytes"] == 9 and by_path["data/kept"]["size_after"] == 7
    assert dropped["dropped_bytes"] == sum(f["bytes"] for f in dropped["files"])
    # What the mount shows after the restart: the fsynced bytes, and nothing else of theirs.
    # Journal mode: the fsync of sub/copy made every earlier create durable, the later ones not.
    assert sh(node, f"cat {DATA}/kept") == "durable"
    assert sh(node, f"cat {DATA}/sub/copy") == "synced"
    assert sh(node, f"wc -c < {DATA}/sub/big").strip() == "0"
    assert sh(node, f"wc -c < {DATA}/new").strip() == "0"  # created before the fsync
    assert ask(node, "status")["pending_files"] == 0


def test_strict_names_wait_for_their_directorys_fsync(docker_client, node: DockerNode) -> None:
    # A second layer in the same container, in strict mode, on a directory of its own.
    prog = f"{IMAGE_LAYOUT.disk_dir}/kchaos-disk"
    sock = "/run/strict.sock"
    sh(node, f"{prog} mount --state /var/lib/strict --control {sock} --names strict /mnt/s")
    sh(node, "cd /mnt/s && printf a > f && sync f && mkdir d && printf b > d/g && sync d/g")
    # The directory d is fsynced (`sync DIR` opens and fsyncs it): g's name is durable, d's
    # (in the root, never fsynced) is not, nor is f's.
    sh(node, "sync /mnt/s/d")
    out = node.exec([prog, "ctl", "--control", sock, "drop"]).stdout
    assert '"op":"mkdir","path":"d"' in out and '"op":"create","path":"f"' in out
    assert '"path":"d/g"' not in out.split('"names"')[1]
    assert sh(node, "ls -A /var/lib/strict/root").strip() == ""


def test_with_writeback_what_stayed_pending_long_enough_survives(node: DockerNode) -> None:
    # A second layer in the same container, whose writeback makes durable what has been
    # pending for a second.
    prog = f"{IMAGE_LAYOUT.disk_dir}/kchaos-disk"
    ctl = [prog, "ctl", "--control", "/run/wb.sock"]
    sh(node, f"{prog} mount --state /var/lib/wb --control /run/wb.sock --writeback 1 /mnt/w")
    sh(node, "printf old > /mnt/w/f")
    for _ in range(200):  # the writeback runs every half second
        if '"written_back":1' in node.exec([*ctl, "status"]).stdout:
            break
    else:
        raise AssertionError("the writeback made nothing durable")
    sh(node, "printf new >> /mnt/w/f")
    out = node.exec([*ctl, "drop"]).stdout
    assert '"path":"f","bytes":3' in out
    assert sh(node, "cat /var/lib/wb/root/f") == "old"


def test_fail_rules_fail_operations_until_healed(node: DockerNode) -> None:
    sh(node, f"mkdir {DATA}/full")
    ask(node, "fail", "write", "ENOSPC", "data/full")
    refused = node.exec(["sh", "-c", f"printf x > {DATA}/full/f"])
    assert not refused.ok and "No space left on device" in refused.stderr
    sh(node, f"printf x > {DATA}/elsewhere")
    ask(node, "fail", "fsync", "EIO")
    assert not node.exec(["sync", f"{DATA}/elsewhere"]).ok
    status = ask(node, "status")
    assert [r["errno"] for r in status["failing"]] == ["ENOSPC", "EIO"]
    assert ask(node, "heal")["cleared"] == 2
    sh(node, f"printf x > {DATA}/full/f && sync {DATA}/full/f")


def test_a_corruption_is_read_through_the_mount_and_survives_a_power_loss(
    node: DockerNode,
) -> None:
    sh(node, f"printf 'ABCDEFGH' > {DATA}/seg && sync {DATA}/seg && cat {DATA}/seg")
    ask(node, "snapshot", "data/seg", "old")
    sh(node, f"printf 'abcdefgh' | dd of={DATA}/seg conv=notrunc,fsync 2>/dev/null")
    flipped = ask(node, "corrupt", "flip", "data/seg", "2", "32")
    assert (flipped["before"], flipped["after"]) == (ord("c"), ord("C"))
    assert sh(node, f"cat {DATA}/seg") == "abCdefgh"
    cut = ask(node, "corrupt", "truncate", "data/seg", "5")
    assert cut["size_before"] == 8 and sh(node, f"cat {DATA}/seg") == "abCde"
    ask(node, "rollback", "data/seg", "old")
    assert sh(node, f"cat {DATA}/seg") == "ABCDEFGH"
    sh(node, f"printf 'x' | dd of={DATA}/seg bs=1 seek=1 conv=notrunc 2>/dev/null")
    # The byte reads see (x) flips, and so does the durable image's (B), which comes back.
    ask(node, "corrupt", "flip", "data/seg", "1", "1")
    assert sh(node, f"cat {DATA}/seg") == "AyCDEFGH"
    power_cycle(node)
    assert sh(node, f"cat {DATA}/seg") == "ACCDEFGH"
    with pytest.raises(DiskLayerError, match="past its end"):
        ask(node, "corrupt", "flip", "data/seg", "8", "1")
    with pytest.raises(DiskLayerError, match="data/nope"):
        ask(node, "corrupt", "flip", "data/nope", "0", "1")


# Slow (`make nightly`): make test must stay under 45 min (session 19 rehearsal: 46).
@pytest.mark.slow
def test_a_run_on_the_layer_records_ok_sends(docker_client, tmp_path) -> None:
    def statuses(dc) -> dict[str, dict[str, Any]]:
        return {name: ask(n, "status") for name, n in dc.nodes().items()}

    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        7,
        tmp_path,
        time_limit=10,
        rate=100,
        disk_layer="journal",
        keep_cluster=True,
        inspect=statuses,
    )
    assert done.result.exit_code == 0, done.result.summary
    assert done.result.summary["ops"].get("ok", 0) > 0
    for name, status in done.inspected.items():
        # Every node's data went through its layer, and nothing was failed or dropped.
        assert status["powered"] and status["bytes_written"] > 0, name
        assert status["fsyncs"] > 0 and status["failed_ops"] == 0, name


def test_a_power_loss_of_one_node_is_recorded_with_what_it_dropped(docker_client, tmp_path):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        5,
        tmp_path,
        # 4.x: 3.9's kafka-storage format never fsyncs bootstrap.checkpoint, and a node that
        # loses power before anything else does cannot start again (docs/disk.md).
        version="4.4",
        time_limit=16,
        rate=100,
        nemesis=["disk:power-loss@one"],
        nemesis_interval=6,
    )
    assert done.result.exit_code == 0, done.result.summary
    ops = [
        op
        for op in read_history(done.result.run_dir).ops
        if op["process"] == "nemesis" and op["type"] == "ok"
    ]
    start = next(op["value"] for op in ops if op["f"] == "start-disk")
    (node,) = start["targets"]
    assert set(start["dropped"]) == {node} and "drop_failed" not in start
    # Nothing of the partitions' segments is fsynced in 6 s (Kafka leaves that to the OS).
    assert any(path.endswith(".log") for path in start["dropped"][node]["files"])
    assert start["effects"][0]["effect"] == "down" and start["effects"][0]["done"] == [node]
    stop = next(op["value"] for op in ops if op["f"] == "stop-disk")
    assert stop["restarted"] == [node]
