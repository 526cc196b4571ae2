"""How a session opens channels: a refusal on a live connection is asked again and never closes
the connection other threads' commands use; a dropped connection is opened again, once."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from clusters.inventory import HostEntry
from clusters.ssh_session import HostUnreachable, SshSession

HOST = HostEntry("n1", "192.0.2.11", frozenset({"broker"}), user="ops")


class Chan:
    def settimeout(self, t: float) -> None:
        self.timeout = t

    def exec_command(self, command: str) -> None:
        self.command = command

    def close(self) -> None:
        pass


class Transport:
    def __init__(self, refusals: int, active: bool = True):
        self.refusals = refusals
        self.active = active

    def is_active(self) -> bool:
        return self.active

    def open_session(self, timeout: float):
        if self.refusals:
            self.refusals -= 1
            raise paramiko.SSHException("Unable to open channel.")
        return Chan()


class Client:
    def __init__(self, transport: Transport):
        self.transport = transport
        self.closed = False

    def get_transport(self) -> Transport:
        return self.transport

    def close(self) -> None:
        self.closed = True


def session(clients: list[Client], monkeypatch) -> SshSession:
    s = SshSession(HOST, Path("/nonexistent/known_hosts"))
    monkeypatch.setattr("clusters.ssh_session.time.sleep", lambda _: None)
    made = iter(clients)
    monkeypatch.setattr(s, "_connect", lambda: next(made))
    return s


def test_a_refused_channel_on_a_live_connection_is_asked_again(monkeypatch):
    client = Client(Transport(refusals=3))
    s = session([client], monkeypatch)
    chan = s._channel("sudo -n -- true", 10)
    assert chan.command == "sudo -n -- true" and chan.timeout == 10
    assert not client.closed  # other threads' channels on it went on


def test_a_dropped_connection_is_opened_again_once(monkeypatch):
    dead = Client(Transport(refusals=1, active=False))
    fresh = Client(Transport(refusals=0))
    s = session([dead, fresh], monkeypatch)
    assert isinstance(s._channel("true", 10), Chan)
    assert dead.closed and not fresh.closed


def test_a_host_that_stays_away_is_unreachable(monkeypatch):
    s = session(
        [Client(Transport(9, active=False)), Client(Transport(9, active=False))], monkeypatch
    )
    with pytest.raises(HostUnreachable, match=r"host n1 .*cannot run a command"):
        s._channel("true", 10)
