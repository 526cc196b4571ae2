"""Who is using a cluster: a hold that `kchaos run`, `cluster up`, `cluster down` and `heal` take
before they touch a cluster, and that each of them sees when another has it.

A hold is an exclusive ``flock`` on ``<cache>/held/<cluster>.lock`` (clusters/cache.py), whose
content says who holds it: pid, command, since when, and a run's directory. The kernel drops a
flock when the last descriptor of it closes, so a holder that dies in any way (SIGKILL, SIGABRT
in native code) leaves no stale hold; a Docker label could not promise that, since a dead run
cannot take its label off. A child forked without exec shares the descriptor and keeps the
hold while it lives (Python opens files non-inheritable, so a child that execs does not).

A holder removes the file while it still has the lock; a taker checks, once it has the lock,
that the path still names the file it locked, so two takers never hold two different files.

``kchaos cluster down --force`` on a held cluster leaves a note (``<cluster>.removed``) naming
who removed it, which the holder reads to say why its cluster vanished.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from clusters.cache import cache_dir
from clusters.errors import ClusterError
from history import strict_json

HELD_DIR = "held"
# Docker's own rule for container names, which every cluster name ends up in.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# A taker that lost a race with a releasing holder tries again; this bounds the loop.
_TAKE_ATTEMPTS = 50
# A holder writes its content right after locking: a reader that comes in between waits this long.
_READ_PATIENCE_S = 1.0


@dataclass(frozen=True)
class Holder:
    """Who holds a cluster, as its hold file says."""

    pid: int
    command: str
    since: str
    run_dir: str | None = None

    def describe(self) -> str:
        where = f", run directory {self.run_dir}" if self.run_dir else ""
        gone = "" if _alive(self.pid) else "; that pid has ended, a child of it holds on"
        return f"pid {self.pid} ({self.command}{where}, since {self.since}{gone})"


class ClusterHeld(ClusterError):
    """Another process holds the cluster; the message names it and how to go ahead anyway."""

    def __init__(self, cluster: str, holder: Holder | None, force_does: str) -> None:
        self.cluster = cluster
        self.holder = holder
        who = holder.describe() if holder else "another process (its hold file says nothing yet)"
        super().__init__(
            f"cluster '{cluster}' is in use by {who}: wait until it ends, or add --force to "
            f"{force_does}"
        )


class ClusterRemoved(ClusterError):
    """The cluster was removed while a run held it (or was using it)."""

    def __init__(self, cluster: str, why: str, kept: str) -> None:
        self.cluster = cluster
        self.why = why
        self.kept = kept
        super().__init__(
            f"cluster '{cluster}' was removed while the run was using it ({why}); {kept}"
        )

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        # A supervised run raises it in its child process and the supervisor raises it again.
        return (type(self), (self.cluster, self.why, self.kept))


# A name ends up in container, network and host names (a hostname label is at most 63).
NAME_MAX = 63
NAME_RULE = (
    "use letters, digits, '_', '.' and '-', starting with a letter or digit, "
    f"at most {NAME_MAX} characters"
)


def name_problem(value: object) -> str | None:
    """Why ``value`` is not a name (a cluster's, SSH hosts', a run's or a campaign's), or None.
    Names become directory names under kchaos's own folders (the hold, hosts state, results),
    so this is also what keeps ``..``, ``/abs`` and ``a/b`` from being used as paths."""
    if not isinstance(value, str) or not _NAME.match(value):
        return NAME_RULE
    if len(value) > NAME_MAX:
        return f"{len(value)} characters: {NAME_RULE}"
    return None


def check_name(value: object, what: str | None = None, noun: str = "cluster name") -> None:
    """Raises ClusterError when ``value`` is not a name, naming ``what`` (an option, a key)."""
    problem = name_problem(value)
    if problem:
        head = f"{what} '{value}'" if what else f"'{value}'"
        raise ClusterError(f"{head} is not a {noun}: {problem}")


def hold_path(cluster: str) -> Path:
    check_name(cluster)
    return cache_dir() / HELD_DIR / f"{cluster}.lock"


def _note_path(cluster: str) -> Path:
    return cache_dir() / HELD_DIR / f"{cluster}.removed"


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Hold:
    """A cluster held by this process until ``release`` (or the process's end)."""

    def __init__(self, cluster: str, path: Path, fd: int, holder: Holder) -> None:
        self.cluster = cluster
        self.path = path
        self.holder = holder
        self._fd: int | None = fd
        self._write()

    def _write(self) -> None:
        assert self._fd is not None
        data = strict_json.dumps(asdict(self.holder), sort_keys=True).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def note_run_dir(self, run_dir: Path | str) -> None:
        """The run's directory, once it exists, for whoever is refused next."""
        self.holder = Holder(self.holder.pid, self.holder.command, self.holder.since, str(run_dir))
        self._write()

    def removed_by(self) -> dict[str, Any] | None:
        """What the note of a forced removal of this hold says, if one was left."""
        note = _read_json(_note_path(self.cluster))
        about = (note or {}).get("holder") or {}
        # Pid and start time name a hold; the run directory may have come after the note's read.
        if (about.get("pid"), about.get("since")) != (self.holder.pid, self.holder.since):
            return None
        return note

    def release(self) -> None:
        if self._fd is None:
            return
        # Removed while still locked: a taker that opened the old file sees it is gone.
        if self.removed_by() is not None:
            with contextlib.suppress(FileNotFoundError):
                _note_path(self.cluster).unlink()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def take(cluster: str, command: str, force_does: str) -> Hold:
    """Holds ``cluster`` for this process, or raises ``ClusterHeld`` naming who holds it."""
    path = hold_path(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(_TAKE_ATTEMPTS):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                raise
            holder = _read_holder(fd)
            os.close(fd)
            raise ClusterHeld(cluster, holder, force_does) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return Hold(cluster, path, fd, Holder(os.getpid(), command, _now()))
        # The holder we waited on removed this file as it let go: take the new one.
        os.close(fd)
    raise ClusterError(f"could not take the hold on cluster '{cluster}' ({path}): it keeps moving")


@contextlib.contextmanager
def holding(
    cluster: str,
    command: str,
    force: bool,
    force_does: str,
    say: Callable[[str], None],
    on_force: Callable[[Holder | None], None] | None = None,
) -> Iterator[Hold | None]:
    """The hold for the block; with ``force``, a held cluster is used anyway (yields None, after
    ``on_force`` is told who holds it)."""
    try:
        hold = take(cluster, command, force_does)
    except ClusterHeld as exc:
        if not force:
            raise
        who = exc.holder.describe() if exc.holder else "another process"
        say(f"warning: cluster '{cluster}' is in use by {who}; going ahead (--force)")
        if on_force is not None:
            on_force(exc.holder)
        yield None
        return
    with hold:
        yield hold


def note_forced_removal(cluster: str, holder: Holder | None, command: str) -> None:
    """Tells the holder of ``cluster`` that ``command`` (this process) removed it anyway."""
    if holder is None:
        return
    note = {
        "pid": os.getpid(),
        "command": command,
        "at": _now(),
        "holder": asdict(holder),
    }
    path = _note_path(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    tmp.write_text(strict_json.dumps(note, sort_keys=True))
    tmp.replace(path)


def _read_holder(fd: int) -> Holder | None:
    deadline = time.monotonic() + _READ_PATIENCE_S
    while True:
        raw = os.pread(fd, 65536, 0)
        try:
            data = json.loads(raw)
            return Holder(
                int(data["pid"]), str(data["command"]), str(data["since"]), data.get("run_dir")
            )
        except (ValueError, KeyError, TypeError):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None
