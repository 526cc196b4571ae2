"""What a node can do, one small capability at a time.

As in Jepsen's db protocols (Kill, Pause, LogFiles: each optional, implemented by a db only if
it can), every capability is its own runtime-checkable Protocol. Callers are typed against the
ones they use, so a node kind other than Docker's (an SSH host with paramiko, say) stands beside
DockerNode by implementing them, without any caller changing. A caller that cannot do without a
capability refuses, before it acts, with ``require``; one that can do without it asks
``isinstance(node, Pause)`` and says in its docstring what it does instead.

Nothing here touches Docker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from clusters.byteman import LoadedRule, Rule
from clusters.errors import ClusterError
from clusters.layout import IMAGE_LAYOUT, Layout
from clusters.topology import NodeSpec


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@runtime_checkable
class Node(Protocol):
    """Who a node is. Every handle has this; each capability below adds what it can do."""

    @property
    def spec(self) -> NodeSpec: ...
    @property
    def name(self) -> str: ...
    @property
    def ip(self) -> str: ...


@runtime_checkable
class Exec(Node, Protocol):
    """Runs a command in the node. Nemeses install iptables chains and tc qdiscs through it."""

    def exec(self, cmd: list[str], timeout: float | None = None) -> ExecResult:
        """Never raises for a non-zero exit (the result says it); raises ClusterError when the
        command cannot be run at all. ``timeout`` kills the command in the node."""
        ...


@runtime_checkable
class Files(Node, Protocol):
    """Moves files in and out. Copying out works on a stopped or killed node too: collection
    reads a dead node's metadata log."""

    def put_file(self, path: str, content: bytes | str, mode: int = 0o644) -> None: ...
    def copy_dir_out(self, path: str, dest: Path) -> None: ...
    def copy_files_out(
        self, paths: Sequence[str], dest: Path, keep: Callable[[str], bool]
    ) -> list[Path]:
        """The files of the directories ``paths`` whose names ``keep`` accepts, copied under
        ``dest`` (as ``dest/<directory name>/<file>``); a directory the node lacks is skipped,
        and ClusterError raised when it has none of them."""
        ...


@runtime_checkable
class Process(Node, Protocol):
    """Starts, stops and kills the node's Kafka (or ZooKeeper) process (Jepsen's Kill)."""

    def start(self) -> None: ...
    def stop(self, timeout: float = 30) -> None: ...
    def kill(self) -> None: ...
    def is_running(self) -> bool:
        """Raises ClusterError when the node itself is gone (status reports it as missing)."""
        ...


@runtime_checkable
class Pause(Node, Protocol):
    """Suspends and resumes the process with SIGSTOP and SIGCONT (Jepsen's Pause)."""

    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def is_paused_by_signal(self) -> bool: ...


@runtime_checkable
class Logs(Node, Protocol):
    """The process's own output, from its first start on."""

    def logs(self, tail: int | None = None) -> str: ...


@runtime_checkable
class Frozen(Node, Protocol):
    """A runtime that can suspend a whole node from outside (``docker pause``, the cgroup
    freezer) says whether it has. kchaos never freezes a node; status shows it, because a node
    frozen by hand would otherwise look running and merely silent."""

    def is_frozen(self) -> bool: ...


@runtime_checkable
class Rules(Node, Protocol):
    """Loads and unloads fault-injection rules in the node's running JVM (Byteman's listener,
    clusters/byteman.py). A JVM restarted holds none: rules live only as long as the process."""

    def load_rules(self, rules: Sequence[Rule]) -> list[str]:
        """Loads or redefines (by name) the rules; the names loaded. Raises ClusterError (its
        subclass ``NoListener`` when the JVM runs no listener)."""
        ...

    def delete_rules(self, names: Iterable[str]) -> list[str]:
        """Unloads the named rules (a name not loaded is no failure); the names unloaded."""
        ...

    def delete_all_rules(self) -> list[str]: ...
    def loaded_rules(self) -> list[LoadedRule]: ...


@runtime_checkable
class Placed(Node, Protocol):
    """A node whose kchaos files are not where the node image keeps them (an SSH host: under the
    inventory's directories). A node without it has the image's layout (``layout_of``)."""

    @property
    def layout(self) -> Layout: ...


@runtime_checkable
class MainPid(Node, Protocol):
    """A node whose Kafka (or ZooKeeper) JVM is not its PID 1 (a host, where PID 1 is init).
    A node without it is a container whose PID 1 is the JVM (``proc_dir``)."""

    def main_pid(self) -> int | None:
        """The JVM's pid, None when it does not run."""
        ...


def layout_of(node: object) -> Layout:
    """Where ``node`` keeps kchaos's files: its own layout, or the node image's."""
    return node.layout if isinstance(node, Placed) else IMAGE_LAYOUT


def proc_dir(node: object) -> str:
    """``/proc/<pid>`` of the node's JVM as seen inside the node: ``/proc/1`` in a container;
    on a host the JVM's own, or a path that exists nowhere when it does not run."""
    if not isinstance(node, MainPid):
        return "/proc/1"
    pid = node.main_pid()
    return f"/proc/{pid}" if pid else "/proc/-1"


# Capabilities taken together, for callers that use several. Python has no intersection types:
# these name the combinations callers need, nothing more (each is still checkable on its own).
@runtime_checkable
class Shell(Exec, Files, Protocol):
    """Run commands and write files: a shell with scp, as Jepsen's control namespace gives."""


@runtime_checkable
class Host(Shell, Process, Protocol):
    """A shell on a node whose process can also be restarted (clock faults need all three)."""


@runtime_checkable
class Collectable(Files, Logs, Protocol):
    """What collection copies from a node: its files (configs, metadata log) and its output."""


@runtime_checkable
class Controllable(Host, Pause, Protocol):
    """Every capability some fault package uses: what a nemesis's FaultContext holds."""


class MissingCapability(ClusterError):
    """A node kind lacks a capability the caller cannot do without."""


def lacking(node: object, capabilities: Iterable[type]) -> list[str]:
    """The names of the capabilities ``node`` does not implement."""
    return [c.__name__ for c in capabilities if not isinstance(node, c)]


def require(nodes: Iterable[object], capabilities: tuple[type, ...], purpose: str) -> None:
    """Refuses, before the caller does anything, every node that lacks what ``purpose`` needs:
    one error naming each such node, its kind and what it lacks."""
    short = []
    for node in nodes:
        missing = lacking(node, capabilities)
        if missing:
            name = getattr(node, "name", repr(node))
            short.append(f"{name} ({type(node).__name__}) lacks {', '.join(missing)}")
    if short:
        needs = ", ".join(c.__name__ for c in capabilities)
        raise MissingCapability(f"{purpose} needs {needs}: {'; '.join(short)}")
