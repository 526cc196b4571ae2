"""An SSH host's node kind: a machine reached with paramiko whose Kafka (or ZooKeeper) JVM runs
under a supervisor the machine has.

``SshNode`` implements every capability of clusters/capabilities.py but ``Frozen`` (nothing
freezes a host from outside): ``Exec`` through ``exec_command``, as root (``sudo -n`` for another
user); ``Files`` through SFTP (into a staging directory in the user's home, then moved into place
as root) and ``tar`` streams out; ``Process`` and ``Pause`` as signals to the JVM's own pid;
``Logs`` from the file its output is appended to; ``Rules`` through the Byteman listener every
Kafka JVM starts with; ``Placed`` (its files under the inventory's directories) and ``MainPid``
(PID 1 of a host is init, not the JVM).

Two supervisors start the JVM (chosen when the cluster comes up, by what the host has):

- ``systemd``: a unit ``kchaos-kafka.service`` whose ExecStart is the rendered entrypoint, its
  output appended to the log file; its MainPID is the JVM.
- ``pidfile`` (no systemd, as in containers): the entrypoint started with ``setsid`` in the
  background, its pid written to ``<install_dir>/run/kafka.pid``; the entrypoint ``exec``s the
  JVM, so that pid is the JVM's. A pid is taken for the JVM only while its command line names
  the node's configuration directory, so a reused pid is never signalled.
"""

from __future__ import annotations

import shlex
import tarfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import IO

from clusters.byteman import ListenerRules
from clusters.capabilities import ExecResult
from clusters.errors import ClusterError
from clusters.file_copy import extract_wanted, listing_command, tar_command, wanted_files
from clusters.inventory import HostEntry
from clusters.layout import Layout, host_layout
from clusters.ssh_session import SshSession
from clusters.topology import NodeSpec

SUPERVISORS = ("systemd", "pidfile")
UNIT = "kchaos-kafka.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
STAGE_DIR = ".kchaos-stage"
STATE_FILE = "cluster.json"
# Exit code of the pid script for "no JVM of this node runs".
NOT_RUNNING = 3


def has_systemd_script() -> list[str]:
    """Exits 0 on a host whose init is systemd (the check systemd's own tools make)."""
    return ["sh", "-c", "[ -d /run/systemd/system ] && command -v systemctl >/dev/null"]


class HostPaths:
    """Where kchaos keeps a host's own files, beside the node's layout."""

    def __init__(self, host: HostEntry) -> None:
        self.install_dir = host.install_dir
        self.data_dir = host.data_dir
        self.run_dir = f"{host.install_dir}/run"
        self.logs_dir = f"{host.install_dir}/logs"
        self.log = f"{self.logs_dir}/kafka.out"
        self.pid_file = f"{self.run_dir}/kafka.pid"
        # The cluster this host is part of: what Docker's labels are for a container.
        self.state = f"{host.install_dir}/{STATE_FILE}"


def unit_text(name: str, cluster: str, entrypoint: str, log: str) -> str:
    """The systemd unit that runs one node's entrypoint. Restart=no: a killed JVM stays down
    until the kill nemesis (or heal) starts it, as on Docker."""
    return f"""[Unit]
Description=kchaos: Kafka node {name} of cluster {cluster}
After=network.target

[Service]
Type=simple
ExecStart=/bin/sh {entrypoint}
StandardOutput=append:{log}
StandardError=append:{log}
Restart=no
KillMode=mixed
TimeoutStopSec=30

[Install]
WantedBy=multi-user.target
"""


def pid_script(source: str, conf_dir: str) -> str:
    """Prints "<pid> <state letter>" of the node's JVM, or exits NOT_RUNNING. ``source`` is a
    shell command printing the supervisor's pid for it."""
    return (
        f"p=$({source} 2>/dev/null); "
        f'[ -n "$p" ] && [ "$p" != 0 ] && [ -r /proc/$p/cmdline ] || exit {NOT_RUNNING}; '
        # A zombie's command line is empty; a reused pid's names another directory.
        f"tr '\\0' ' ' < /proc/$p/cmdline | grep -qF -- {shlex.quote(conf_dir)} "
        f"|| exit {NOT_RUNNING}; "
        f"s=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f1) || exit {NOT_RUNNING}; "
        'echo "$p $s"'
    )


def stop_script(pid: int, timeout: float) -> str:
    """SIGTERM, up to ``timeout`` seconds for the JVM to exit, then SIGKILL; waits until it is
    gone (a zombie counts as gone: its parent reaps it)."""
    ticks = max(0, int(timeout * 10))
    alive = (
        f"[ -r /proc/{pid}/stat ] && "
        f"[ \"$(sed 's/.*) //' /proc/{pid}/stat 2>/dev/null | cut -d' ' -f1)\" != Z ]"
    )
    return (
        f"kill -TERM {pid} 2>/dev/null; kill -CONT {pid} 2>/dev/null; i=0; "
        f"while {alive} && [ $i -lt {ticks} ]; do sleep 0.1; i=$((i+1)); done; "
        f"{alive} && kill -KILL {pid} 2>/dev/null; i=0; "
        f"while {alive} && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; :"
    )


class SshNode(ListenerRules):
    """A Kafka (or ZooKeeper) node on a host reached over SSH."""

    def __init__(
        self, session: SshSession, spec: NodeSpec, host: HostEntry, supervisor: str = "pidfile"
    ) -> None:
        if supervisor not in SUPERVISORS:
            raise ClusterError(f"unknown supervisor {supervisor!r}: one of {SUPERVISORS}")
        self.session = session
        self.spec = spec
        self.host = host
        self.supervisor = supervisor
        self.paths = HostPaths(host)
        self._layout = host_layout(host.install_dir, host.data_dir, host.interface)
        self._home: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def ip(self) -> str:
        return self.spec.ip

    @property
    def layout(self) -> Layout:
        return self._layout

    def __repr__(self) -> str:
        return f"SshNode({self.name}@{self.ip}, {self.supervisor})"

    # Exec
    def exec(self, cmd: list[str], timeout: float | None = None) -> ExecResult:
        """Runs a command as root in the host; ``timeout`` kills it there (coreutils timeout)."""
        code, out, err = self.session.run(cmd, timeout=timeout)
        return ExecResult(code, out.decode(errors="replace"), err.decode(errors="replace"))

    def _sh(self, script: str, timeout: float | None = 60) -> ExecResult:
        return self.exec(["sh", "-c", script], timeout=timeout)

    def _must(self, script: str, what: str, timeout: float | None = 60) -> ExecResult:
        result = self._sh(script, timeout)
        if not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise ClusterError(
                f"node {self.name}: could not {what}: {detail[-1] if detail else result.exit_code}"
            )
        return result

    # Files
    def put_file(self, path: str, content: bytes | str, mode: int = 0o644) -> None:
        """Writes a file through SFTP: staged in the user's home, then moved into place as root
        (replacing the old file at once, so no reader sees half of it)."""
        data = content.encode() if isinstance(content, str) else content
        mode = 0o755 if path.endswith(".sh") else mode
        staged = self.stage(data)
        script = (
            'mkdir -p "$(dirname "$2")" && install -m "$3" "$1" "$2.kchaos-new" '
            '&& mv -f "$2.kchaos-new" "$2"; rc=$?; rm -f "$1"; exit $rc'
        )
        result = self.exec(["sh", "-c", script, "sh", staged, path, f"{mode:o}"], timeout=60)
        if not result.ok:
            raise ClusterError(f"node {self.name}: could not write {path}: {result.stderr.strip()}")

    def put_files(self, files: dict[str, bytes | str], mode: int = 0o644) -> None:
        for path, content in files.items():
            self.put_file(path, content, mode)

    def stage(self, data: bytes | IO[bytes]) -> str:
        """Uploads ``data`` (bytes or a file) by SFTP into the user's staging directory; returns
        the staged file's path (the caller moves or removes it)."""
        with self.session.sftp_lock:
            sftp = self.session.sftp()
            if self._home is None:
                self._home = sftp.normalize(".")
            stage_dir = f"{self._home}/{STAGE_DIR}"
            try:
                sftp.stat(stage_dir)
            except OSError:
                sftp.mkdir(stage_dir, 0o700)
            staged = f"{stage_dir}/{uuid.uuid4().hex}"
            try:
                if isinstance(data, bytes):
                    with sftp.open(staged, "wb") as f:
                        f.set_pipelined(True)
                        f.write(data)
                else:
                    sftp.putfo(data, staged)
            except OSError as exc:
                raise ClusterError(f"node {self.name}: SFTP upload failed: {exc}") from None
        return staged

    def get_file(self, path: str) -> bytes:
        result = self.session.run(["cat", path])
        if result[0] != 0:
            raise ClusterError(f"node {self.name}: no {path}")
        return result[1]

    def copy_dir_out(self, path: str, dest: Path) -> None:
        """Copies a directory out as ``dest/<its name>/``, as Docker's archive does; works with
        the JVM down (the host is not)."""
        dest.mkdir(parents=True, exist_ok=True)
        top = PurePosixPath(path).name

        def extract(stdout: IO[bytes]) -> None:
            with tarfile.open(fileobj=stdout, mode="r|") as tar:
                for member in tar:
                    rel = PurePosixPath(member.name)
                    member.name = str(PurePosixPath(top, *[p for p in rel.parts if p != "."]))
                    tar.extract(member, dest, filter="data")

        code, err, _ = self.session.stream(["tar", "-cf", "-", "-C", path, "."], extract)
        if code != 0:
            raise ClusterError(f"node {self.name}: no {path} ({err.decode(errors='replace')})")

    def copy_files_out(
        self, paths: Sequence[str], dest: Path, keep: Callable[[str], bool]
    ) -> list[Path]:
        """Copies the kept files of directories ``paths`` into ``dest/<directory name>/``: one
        listing, then one tar of just those files (never a log directory's 10 MB indexes)."""
        listing = self.exec(listing_command(paths), timeout=120)
        if not listing.ok:
            raise ClusterError(f"node {self.name}: cannot list {', '.join(paths)}")
        wanted = wanted_files(listing.stdout, paths, keep, self.name)
        if not wanted:
            return []
        out: list[Path] = []

        def extract(stdout: IO[bytes]) -> None:
            out.extend(extract_wanted(stdout, wanted, dest))

        # A segment Kafka deletes between the listing and the tar is left out, not an error.
        argv = tar_command(wanted, "--ignore-failed-read")
        code, err, _ = self.session.stream(argv, extract)
        if code not in (0, 1):
            raise ClusterError(f"node {self.name}: tar failed: {err.decode(errors='replace')}")
        return out

    # Process
    def _pid_source(self) -> str:
        if self.supervisor == "systemd":
            return f"systemctl show -p MainPID --value {UNIT}"
        return f"cat {shlex.quote(self.paths.pid_file)}"

    def _pid_state(self) -> tuple[int, str] | None:
        """The JVM's pid and process state letter, None when no JVM of this node runs. Raises
        ClusterError (HostUnreachable) when the host cannot be asked."""
        result = self._sh(pid_script(self._pid_source(), self._layout.conf_dir), timeout=20)
        if result.exit_code == NOT_RUNNING:
            return None
        words = result.stdout.split()
        if not result.ok or len(words) != 2 or not words[0].isdigit():
            raise ClusterError(
                f"node {self.name}: cannot tell whether its JVM runs: {result.stderr.strip()}"
            )
        return int(words[0]), words[1]

    def main_pid(self) -> int | None:
        got = self._pid_state()
        return got[0] if got and got[1] not in ("Z", "X") else None

    def is_running(self) -> bool:
        return self.main_pid() is not None

    def is_paused_by_signal(self) -> bool:
        try:
            got = self._pid_state()
        except ClusterError:
            return False
        return got is not None and got[1] in ("T", "t")

    def start(self) -> None:
        """Starts the JVM through the entrypoint; nothing when it runs already."""
        if self.is_running():
            return
        entry = f"{self._layout.conf_dir}/entrypoint.sh"
        p = self.paths
        if self.supervisor == "systemd":
            script = (
                f"mkdir -p {shlex.quote(p.logs_dir)} && "
                f"(systemctl reset-failed {UNIT} 2>/dev/null; :) && systemctl start {UNIT}"
            )
        else:
            # setsid: the JVM leaves the SSH session's process group; its output is appended,
            # so the log holds every start, as a container's does.
            script = (
                f"mkdir -p {shlex.quote(p.run_dir)} {shlex.quote(p.logs_dir)} && cd / || exit 1; "
                f"setsid sh {shlex.quote(entry)} >> {shlex.quote(p.log)} 2>&1 < /dev/null & "
                f"echo $! > {shlex.quote(p.pid_file)}"
            )
        self._must(script, "start its JVM")

    def stop(self, timeout: float = 30) -> None:
        pid = self.main_pid()
        if pid is None:
            return
        self._must(stop_script(pid, timeout), "stop its JVM", timeout=timeout + 30)

    def signal(self, name: str) -> None:
        """Sends SIGname to the JVM itself (its pid, not the host's or a shell's)."""
        pid = self.main_pid()
        if pid is None:
            raise ClusterError(f"node {self.name}: its JVM does not run")
        result = self.exec(["kill", f"-{name}", str(pid)], timeout=20)
        if not result.ok:
            raise ClusterError(f"node {self.name}: cannot send SIG{name}: {result.stderr.strip()}")

    def kill(self) -> None:
        self.signal("KILL")

    def pause(self) -> None:
        self.signal("STOP")

    def resume(self) -> None:
        self.signal("CONT")

    # Logs
    def logs(self, tail: int | None = None) -> str:
        argv = (
            ["tail", "-n", str(tail), self.paths.log]
            if tail is not None
            else ["cat", self.paths.log]
        )
        code, out, _ = self.session.run(argv, timeout=120)
        return out.decode(errors="replace") if code == 0 else ""


def read_state(session: SshSession, host: HostEntry) -> bytes | None:
    """The cluster state file of a host, None when it has none."""
    code, out, _ = session.run(["cat", HostPaths(host).state], timeout=30)
    return out if code == 0 else None
