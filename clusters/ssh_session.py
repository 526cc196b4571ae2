"""One SSH connection per host (paramiko): commands, their output streamed or whole, and SFTP.

Host keys are verified against the inventory's known_hosts. A host missing from it is refused,
unless the inventory (or ``--accept-new-host-keys``) says to accept new ones: then its key is
added to the file and that is said, never done silently. A host whose key differs from the one
known is always refused (paramiko's BadHostKeyException): that is what verification is for.

A session connects when first used, again when its connection has dropped, and afresh in a
process forked after it connected (the supervised run's client host, harness/run/supervisor.py):
two processes must not share one SSH transport.
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import paramiko

from clusters.errors import ClusterError
from clusters.inventory import HostEntry

CONNECT_TIMEOUT_S = 15.0
KEEPALIVE_S = 15
# With no timeout of its own, a command whose output stops for this long is taken for lost.
IDLE_TIMEOUT_S = 600.0
# A command given a timeout is killed in the host by coreutils' timeout; the channel waits this
# much longer before it gives up on the host itself.
GRACE_S = 30.0
CHUNK = 1 << 16
# sshd allows MaxSessions (10 by default) channels at once on one connection: commands hold at
# most this many, which leaves room for SFTP and for sessions sshd has not yet let go of after
# their close. A channel refused anyway is asked for again after a pause, this many times.
MAX_CHANNELS = 6
OPEN_ATTEMPTS = 20
# sudo's secure_path and root's login PATH, so iptables, tc and sshd's tools are found whoever
# logs in: a non-root user's PATH over SSH often lacks the sbin directories.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# paramiko logs a refused channel (which is retried) and a dropped connection (which is opened
# again, or becomes a HostUnreachable that says so) at ERROR on stderr, into the run's output.
logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)


class HostUnreachable(ClusterError):
    """The host cannot be reached or logged into (as status says: the node is missing)."""


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """Adds an unknown host's key to known_hosts, and says so."""

    def __init__(self, known_hosts: Path, say: Callable[[str], None], lock: threading.Lock):
        self.known_hosts = known_hosts
        self.say = say
        self.lock = lock

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        with self.lock:
            known = paramiko.HostKeys()
            if self.known_hosts.exists():
                known.load(str(self.known_hosts))
            known.add(hostname, key.get_name(), key)
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            known.save(str(self.known_hosts))
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.say(
            f"warning: {hostname} was not in {self.known_hosts}: accepted its "
            f"{key.get_name()} key {key.fingerprint} and added it (accept_new_host_keys)"
        )


# One lock for every writer of known_hosts files in this process.
_KNOWN_HOSTS_LOCK = threading.Lock()


def command_line(argv: list[str], sudo: bool, timeout: float | None = None) -> str:
    """The remote shell's command line for ``argv``: under ``sudo -n`` for a user other than
    root, with the standard PATH, and killed by coreutils' timeout after ``timeout`` seconds."""
    words = ["env", f"PATH={PATH}"]
    if timeout:
        words += ["timeout", "-s", "KILL", f"{timeout:g}"]
    words += argv
    if sudo:
        words = ["sudo", "-n", "--", *words]
    return shlex.join(words)


class SshSession:
    """The connection to one host of an inventory."""

    def __init__(
        self,
        host: HostEntry,
        known_hosts: Path,
        accept_new: bool = False,
        say: Callable[[str], None] = print,
    ) -> None:
        self.host = host
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.say = say
        self._client: paramiko.SSHClient | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = threading.Lock()
        self._channels = threading.BoundedSemaphore(MAX_CHANNELS)

    def __repr__(self) -> str:
        h = self.host
        return f"SshSession({h.user}@{h.address}:{h.port})"

    @property
    def where(self) -> str:
        h = self.host
        return f"host {h.name} ({h.user}@{h.address}:{h.port})"

    # The connection ---------------------------------------------------------------------------
    def client(self) -> paramiko.SSHClient:
        with self._lock:
            c = self._client
            transport = c.get_transport() if c is not None else None
            if c is not None and self._pid == os.getpid() and transport and transport.is_active():
                return c
            if c is not None and self._pid == os.getpid():
                c.close()
            # In a forked child the parent's client is left alone: closing it would send on the
            # socket the parent still uses.
            self._client, self._sftp = None, None
            self._client = self._connect()
            self._pid = os.getpid()
            return self._client

    def _connect(self) -> paramiko.SSHClient:
        h = self.host
        c = paramiko.SSHClient()
        if self.known_hosts.exists():
            c.load_host_keys(str(self.known_hosts))
        if self.accept_new:
            c.set_missing_host_key_policy(_AcceptNew(self.known_hosts, self.say, _KNOWN_HOSTS_LOCK))
        else:
            c.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            c.connect(
                hostname=h.address,
                port=h.port,
                username=h.user,
                key_filename=str(h.key) if h.key is not None else None,
                allow_agent=h.agent,
                look_for_keys=h.agent,
                timeout=CONNECT_TIMEOUT_S,
                banner_timeout=CONNECT_TIMEOUT_S,
                auth_timeout=CONNECT_TIMEOUT_S,
            )
        except paramiko.BadHostKeyException as exc:
            c.close()
            raise ClusterError(
                f"{self.where}: its host key ({exc.key.get_name()} {exc.key.fingerprint}) is not "
                f"the one {self.known_hosts} has for it: refusing to connect. If the host was "
                "reinstalled, check the new key and replace its line in known_hosts"
            ) from None
        except paramiko.SSHException as exc:
            c.close()
            text = str(exc)
            if "not found in known_hosts" in text:
                raise ClusterError(
                    f"{self.where} is not in {self.known_hosts}: add its key after checking "
                    "its fingerprint (ssh-keyscan), or accept new host keys on purpose "
                    "(accept_new_host_keys: true in the inventory, or --accept-new-host-keys)"
                ) from None
            raise HostUnreachable(f"{self.where}: SSH failed: {text}") from None
        except (OSError, EOFError) as exc:
            c.close()
            raise HostUnreachable(f"{self.where} is unreachable: {exc}") from None
        transport = c.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)
        return c

    def close(self) -> None:
        with self._lock:
            if self._client is not None and self._pid == os.getpid():
                self._client.close()
            self._client, self._sftp = None, None

    def _drop(self, client: paramiko.SSHClient) -> None:
        """Forgets a connection that failed, unless another thread has replaced it already."""
        with self._lock:
            if self._client is client and self._pid == os.getpid():
                client.close()
                self._client, self._sftp = None, None

    # Commands ---------------------------------------------------------------------------------
    def _channel(self, command: str, idle: float) -> paramiko.Channel:
        last: Exception | None = None
        reconnected = False
        for attempt in range(OPEN_ATTEMPTS):
            client = self.client()
            transport = client.get_transport()
            try:
                if transport is None:
                    raise paramiko.SSHException("no transport")
                chan = transport.open_session(timeout=CONNECT_TIMEOUT_S)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                last = exc
                if transport is not None and transport.is_active():
                    # Refused by the server (too many sessions at once): the connection is
                    # fine, and other threads' channels on it go on.
                    time.sleep(min(0.05 * (attempt + 1), 0.5))
                    continue
                # The connection dropped since its last use: opened again, once.
                self._drop(client)
                if reconnected:
                    break
                reconnected = True
                continue
            try:
                chan.settimeout(idle)
                chan.exec_command(command)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                chan.close()
                last = exc
                continue
            return chan
        raise HostUnreachable(f"{self.where}: cannot run a command: {last}")

    def run(
        self,
        argv: list[str],
        timeout: float | None = None,
        stdin: bytes | None = None,
        sudo: bool | None = None,
    ) -> tuple[int, bytes, bytes]:
        """Runs ``argv`` in the host: (exit code, stdout, stderr). ``sudo`` defaults to the
        host's (every command as root); raises HostUnreachable when it cannot be run at all."""
        sudo = self.host.sudo if sudo is None else sudo
        idle = (timeout + GRACE_S) if timeout else IDLE_TIMEOUT_S
        with self._channels:
            return self._run(argv, command_line(argv, sudo, timeout), idle, stdin)

    def _run(
        self, argv: list[str], command: str, idle: float, stdin: bytes | None
    ) -> tuple[int, bytes, bytes]:
        chan = self._channel(command, idle)
        try:
            if stdin is not None:
                chan.sendall(stdin)
            chan.shutdown_write()
            err: list[bytes] = []
            # stderr is read beside stdout: a command that fills one while the other is read
            # would otherwise wait on a window that never opens.
            reader = threading.Thread(target=_drain, args=(chan.makefile_stderr("rb"), err))
            reader.start()
            out = []
            while chunk := chan.recv(CHUNK):
                out.append(chunk)
            reader.join(idle)
            code = chan.recv_exit_status()
        except TimeoutError:
            raise HostUnreachable(
                f"{self.where}: '{shlex.join(argv)[:80]}' gave nothing for {idle:.0f} s"
            ) from None
        finally:
            chan.close()
        return code, b"".join(out), b"".join(err)

    def stream(
        self, argv: list[str], consume: Callable[[IO[bytes]], Any], sudo: bool | None = None
    ) -> tuple[int, bytes, Any]:
        """Runs ``argv`` and hands its stdout, as a file, to ``consume`` while it runs (a tar
        read as it is written): (exit code, stderr, what ``consume`` returned)."""
        sudo = self.host.sudo if sudo is None else sudo
        with self._channels:
            return self._stream(argv, command_line(argv, sudo), consume)

    def _stream(
        self, argv: list[str], command: str, consume: Callable[[IO[bytes]], Any]
    ) -> tuple[int, bytes, Any]:
        chan = self._channel(command, IDLE_TIMEOUT_S)
        try:
            chan.shutdown_write()
            err: list[bytes] = []
            reader = threading.Thread(target=_drain, args=(chan.makefile_stderr("rb"), err))
            reader.start()
            stdout = chan.makefile("rb")
            result = consume(stdout)
            while stdout.read(CHUNK):
                pass  # what the consumer left unread, so the command can end
            reader.join(IDLE_TIMEOUT_S)
            code = chan.recv_exit_status()
        except TimeoutError:
            raise HostUnreachable(f"{self.where}: '{shlex.join(argv)[:80]}' stalled") from None
        finally:
            chan.close()
        return code, b"".join(err), result

    # SFTP -------------------------------------------------------------------------------------
    def sftp(self) -> paramiko.SFTPClient:
        """The connection's SFTP client (one per connection; callers hold ``sftp_lock``)."""
        client = self.client()
        if self._sftp is None:
            try:
                self._sftp = client.open_sftp()
            except (paramiko.SSHException, OSError) as exc:
                raise HostUnreachable(f"{self.where}: SFTP failed: {exc}") from None
        return self._sftp

    @property
    def sftp_lock(self) -> threading.Lock:
        return self._sftp_lock


def _drain(f: IO[bytes], into: list[bytes]) -> None:
    try:
        while chunk := f.read(CHUNK):
            into.append(chunk)
    except (TimeoutError, OSError, EOFError):
        pass
