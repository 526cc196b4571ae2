"""The SSH node kind without a network: its session is replaced by one that runs the very same
command lines on this machine, so the shell it sends (starting a JVM in the background with a
pid file, telling a live JVM from a reused pid or a zombie, signals, tar streams out, files
staged and moved into place) runs for real, under directories of a temporary root.

The stand-in JVM is a shell loop whose command line names the node's configuration directory,
as a Kafka JVM's does (its server.properties)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from clusters import capabilities as caps
from clusters.collect import kept_raw_file
from clusters.errors import ClusterError
from clusters.inventory import HostEntry
from clusters.ssh_node import SshNode, pid_script, stop_script, unit_text
from clusters.ssh_session import command_line
from clusters.topology import NodeSpec

SPEC = NodeSpec("n1", frozenset({"broker", "controller"}), 1, "192.0.2.11")


class LocalSftp:
    """The few SFTP calls the node makes, on local files."""

    def __init__(self, home: Path):
        self.home = home

    def normalize(self, path: str) -> str:
        return str(self.home)

    def stat(self, path: str) -> os.stat_result:
        return os.stat(path)

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(path, mode)

    def open(self, path: str, how: str):
        f = open(path, how)  # noqa: SIM115 - returned to the caller's with-block
        f.set_pipelined = lambda _on: None  # type: ignore[attr-defined]
        return f

    def putfo(self, fo: IO[bytes], path: str) -> None:
        with open(path, "wb") as out:
            shutil.copyfileobj(fo, out)


class LocalSession:
    """Runs the command lines an SshSession would send, in a local shell (never with sudo)."""

    def __init__(self, home: Path):
        self.sent: list[str] = []
        self._sftp = LocalSftp(home)
        self.sftp_lock = threading.Lock()

    def run(
        self, argv: list[str], timeout: float | None = None, stdin: bytes | None = None, sudo=None
    ) -> tuple[int, bytes, bytes]:
        line = command_line(argv, False, timeout)
        self.sent.append(line)
        done = subprocess.run(["sh", "-c", line], input=stdin or b"", capture_output=True)
        return done.returncode, done.stdout, done.stderr

    def stream(
        self, argv: list[str], consume: Callable[[IO[bytes]], Any], sudo=None
    ) -> tuple[int, bytes, Any]:
        line = command_line(argv, False)
        self.sent.append(line)
        proc = subprocess.Popen(["sh", "-c", line], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        result = consume(proc.stdout)
        proc.stdout.read()
        err = proc.stderr.read()
        return proc.wait(), err, result

    def sftp(self) -> LocalSftp:
        return self._sftp


@pytest.fixture
def node(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    host = HostEntry(
        "n1",
        "192.0.2.11",
        SPEC.roles,
        user="root",
        install_dir=str(tmp_path / "opt"),
        data_dir=str(tmp_path / "var"),
    )
    n = SshNode(LocalSession(home), SPEC, host, "pidfile")  # type: ignore[arg-type]
    conf = n.layout.conf_dir
    # The stand-in JVM: it execs a loop whose command line names the configuration directory.
    n.put_file(
        f"{conf}/entrypoint.sh",
        "#!/bin/sh\necho started\n"
        f"exec sh -c 'while :; do sleep 0.1; done' {conf}/server.properties\n",
    )
    yield n
    pid = n.main_pid()  # never the pid file's word alone: one test puts this process's pid there
    if pid:
        os.kill(pid, signal.SIGKILL)


def _pid(n: SshNode) -> int | None:
    try:
        return int(Path(n.paths.pid_file).read_text())
    except (OSError, ValueError):
        return None


def _until(probe: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_ssh_node_has_every_capability_but_frozen_and_a_host_layout(node: SshNode):
    assert isinstance(node, caps.Controllable) and isinstance(node, caps.Collectable)
    assert isinstance(node, caps.Rules) and isinstance(node, caps.Placed)
    assert isinstance(node, caps.MainPid) and not isinstance(node, caps.Frozen)
    layout = caps.layout_of(node)
    assert layout.lasting_network
    assert layout.conf_dir.endswith("/opt/etc/kafka") and layout.data_dir.endswith("/var/data")


def test_start_kill_pause_resume_stop_act_on_the_jvms_own_pid(node: SshNode):
    assert not node.is_running() and node.main_pid() is None
    node.start()
    _until(node.is_running)
    pid = node.main_pid()
    assert pid == _pid(node) and caps.proc_dir(node) == f"/proc/{pid}"
    node.start()  # running already: nothing
    assert node.main_pid() == pid
    node.pause()
    _until(node.is_paused_by_signal)
    node.resume()
    _until(lambda: not node.is_paused_by_signal())
    node.kill()
    _until(lambda: not node.is_running())
    assert caps.proc_dir(node) == "/proc/-1"
    node.start()
    _until(node.is_running)
    assert node.main_pid() != pid
    node.stop(timeout=2)
    assert not node.is_running()
    assert node.logs().count("started") == 2
    assert node.logs(tail=1) == "started\n"


def test_a_pid_file_naming_another_process_is_not_the_jvm(node: SshNode):
    Path(node.paths.run_dir).mkdir(parents=True)
    # A pid reused by something else (this test's own process) must never be signalled.
    Path(node.paths.pid_file).write_text(str(os.getpid()))
    assert not node.is_running()
    with pytest.raises(ClusterError, match="does not run"):
        node.kill()


def test_files_are_staged_then_moved_into_place_and_copied_out(node: SshNode, tmp_path: Path):
    data = node.layout.data_dir
    node.put_file(f"{data}/__cluster_metadata-0/00000000000000000000.log", b"segment")
    node.put_file(f"{data}/__cluster_metadata-0/00000000000000000000.index", b"\0" * 64)
    node.put_file(f"{data}/__cluster_metadata-0/quorum-state", "{}")
    assert list((tmp_path / "home" / ".kchaos-stage").iterdir()) == []
    entry = Path(node.layout.conf_dir) / "entrypoint.sh"
    assert entry.stat().st_mode & 0o777 == 0o755
    out = tmp_path / "out"
    got = node.copy_files_out(
        [f"{data}/__cluster_metadata-0", f"{data}/missing-0"], out, kept_raw_file
    )
    assert sorted(p.name for p in got) == ["00000000000000000000.log", "quorum-state"]
    assert (out / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes() == b"segment"
    with pytest.raises(ClusterError, match="no "):
        node.copy_files_out([f"{data}/missing-0"], out, kept_raw_file)
    node.copy_dir_out(node.layout.conf_dir, out / "logs")
    assert (out / "logs" / "kafka" / "entrypoint.sh").exists()  # named as Docker's archive names it
    assert node.get_file(str(entry)).startswith(b"#!/bin/sh")


def test_commands_run_as_root_through_sudo_with_the_standard_path():
    assert command_line(["iptables", "-S"], sudo=False) == (
        "env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin iptables -S"
    )
    line = command_line(["sh", "-c", "echo $HOME"], sudo=True, timeout=5)
    assert line.startswith("sudo -n -- env PATH=")
    assert line.endswith("timeout -s KILL 5 sh -c 'echo $HOME'")


def test_the_scripts_quote_what_they_are_given():
    assert "grep -qF -- '/opt/my dir/etc/kafka'" in pid_script("cat x", "/opt/my dir/etc/kafka")
    assert "kill -TERM 42" in stop_script(42, 1) and "-lt 10 ]" in stop_script(42, 1)
    unit = unit_text("n1", "lab", "/opt/kchaos/etc/kafka/entrypoint.sh", "/opt/kchaos/logs/k.out")
    assert "ExecStart=/bin/sh /opt/kchaos/etc/kafka/entrypoint.sh" in unit
    assert "Restart=no" in unit and "StandardOutput=append:/opt/kchaos/logs/k.out" in unit


def test_an_ssh_cluster_comes_up_with_every_option_a_docker_cluster_takes():
    # The interpreter brings either up with the same arguments: a merge that taught Docker's
    # `up` a new keyword (features, for --txn-protocol) and not the hosts' broke every run on
    # them. Both now take one UpOptions (tests/unit/clusters/test_handles.py).
    import inspect

    from clusters.docker_lifecycle import DockerCluster
    from clusters.ssh_cluster import SshCluster

    docker = list(inspect.signature(DockerCluster.up).parameters)
    ssh = list(inspect.signature(SshCluster.up).parameters)
    assert docker == ssh == ["self", "topo", "options", "say"]
