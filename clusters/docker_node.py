"""Docker's node kind: a container whose PID 1 is the Kafka (or ZooKeeper) JVM.

Implements every capability in clusters/capabilities.py (``Rules`` through the Byteman
listener every Kafka JVM starts with, clusters/byteman.py), plus what only Docker's own machinery
uses (``put_files`` writes into a created, not yet started container; ``state`` is Docker's).
"""

from __future__ import annotations

import io
import signal
import tarfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors

from clusters.byteman import ListenerRules
from clusters.capabilities import ExecResult
from clusters.disk_layer import DOCKER_LABEL, backing_path
from clusters.errors import ClusterError
from clusters.file_copy import extract_wanted, listing_command, tar_command, wanted_files
from clusters.topology import NodeSpec

# Docker's archive stream and the tar reader over it move a log directory in pieces this large.
_ARCHIVE_CHUNK = 1 << 20


class _ChunkReader(io.RawIOBase):
    """A file over an iterator of byte chunks (Docker's archive stream). Reads hand out views of
    the current chunk: slicing the rest off a 2 MB chunk at every read copied it again and again,
    ~1 CPU-s per run for the data logs alone."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = iter(chunks)
        self._chunk = memoryview(b"")
        self._at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        while self._at >= len(self._chunk):
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._chunk, self._at = memoryview(chunk), 0
        n = min(len(buf), len(self._chunk) - self._at)
        buf[:n] = self._chunk[self._at : self._at + n]
        self._at += n
        return n


class DockerNode(ListenerRules):
    """A node in a Docker container whose PID 1 is the Kafka (or ZooKeeper) JVM."""

    def __init__(self, client: docker.DockerClient, container_name: str, spec: NodeSpec):
        self.client = client
        self.container_name = container_name
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def ip(self) -> str:
        return self.spec.ip

    def _container(self):
        try:
            return self.client.containers.get(self.container_name)
        except docker.errors.NotFound:
            raise ClusterError(
                f"node {self.name}: container {self.container_name} is gone"
            ) from None

    def __repr__(self) -> str:
        return f"DockerNode({self.name}@{self.ip})"

    # Exec
    def exec(self, cmd: list[str], timeout: float | None = None) -> ExecResult:
        """Runs a command inside the node; ``timeout`` uses coreutils timeout in the node."""
        argv = ["timeout", "-s", "KILL", str(timeout), *cmd] if timeout else cmd
        try:
            result = self._container().exec_run(argv, demux=True)
        except docker.errors.APIError as exc:
            raise ClusterError(
                f"node {self.name}: cannot run {cmd[0]}: {exc.explanation}"
            ) from None
        out, err = result.output if result.output else (b"", b"")
        return ExecResult(
            result.exit_code if result.exit_code is not None else -1,
            (out or b"").decode(errors="replace"),
            (err or b"").decode(errors="replace"),
        )

    # Files
    def put_file(self, path: str, content: bytes | str, mode: int = 0o644) -> None:
        self.put_files({path: content}, mode)

    def put_files(self, files: Mapping[str, bytes | str], mode: int = 0o644) -> None:
        """Writes files in one archive; works on a created but not yet started container."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path, content in files.items():
                data = content.encode() if isinstance(content, str) else content
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size = len(data)
                info.mode = 0o755 if path.endswith(".sh") else mode
                tar.addfile(info, io.BytesIO(data))
        if not self._container().put_archive("/", buf.getvalue()):
            raise ClusterError(f"node {self.name}: could not write {', '.join(files)}")

    def _kept_at(self, container: Any, path: str) -> str:
        """Where the node keeps `path`: on the disk layer, a path under its mountpoint is read
        from the backing directory, which holds the same bytes and outlives the mount (a
        stopped or killed node's mount is gone with its process)."""
        if (container.labels or {}).get(DOCKER_LABEL) is None:
            return path
        return backing_path(self.spec, path)

    def get_file(self, path: str) -> bytes:
        tar = self._get_archive(path)
        member = next((m for m in tar.getmembers() if m.isfile()), None)
        if member is None:
            raise ClusterError(f"node {self.name}: {path} is not a file")
        extracted = tar.extractfile(member)
        assert extracted is not None
        return extracted.read()

    def copy_dir_out(self, path: str, dest: Path) -> None:
        """Copies a directory out; works on a stopped or killed container too."""
        dest.mkdir(parents=True, exist_ok=True)
        tar = self._get_archive(path)
        tar.extractall(dest, filter="data")

    def copy_files_out(
        self, paths: Sequence[str], dest: Path, keep: Callable[[str], bool]
    ) -> list[Path]:
        """Copies the files of directories whose names ``keep`` accepts, each directory's under
        ``dest/<its name>/``. A log directory also holds 10 MB indexes Kafka preallocates: from a
        running container only the kept files leave it (one listing and one tar inside it; the
        indexes of every partition on a broker came to about half a gigabyte streamed through
        Docker and this process per run); a stopped one's directories are streamed whole and
        the rest read past, never held."""
        container = self._container()
        paths = [self._kept_at(container, p) for p in paths]
        if container.status == "running":
            copied = self._copy_from_running(paths, dest, keep)
            if copied is not None:
                return copied
        out: list[Path] = []
        found = 0
        for path in paths:
            try:
                stream, _ = container.get_archive(path, chunk_size=_ARCHIVE_CHUNK)
            except docker.errors.NotFound:
                continue
            found += 1
            reader = io.BufferedReader(_ChunkReader(stream), _ARCHIVE_CHUNK)
            with tarfile.open(fileobj=reader, mode="r|", bufsize=_ARCHIVE_CHUNK) as tar:
                for member in tar:
                    if member.isfile() and keep(Path(member.name).name):
                        tar.extract(member, dest, filter="data")
                        out.append(dest / member.name)
        if not found:
            raise ClusterError(f"node {self.name}: no {', '.join(paths)}")
        return out

    def _copy_from_running(
        self, paths: Sequence[str], dest: Path, keep: Callable[[str], bool]
    ) -> list[Path] | None:
        """The kept files of ``paths`` through a tar made inside the node, or None when the node
        could not make one (it stopped meanwhile): the caller streams the directories instead."""
        listing = self.exec(listing_command(paths))
        if listing.exit_code != 0:
            return None
        wanted = wanted_files(listing.stdout, paths, keep, self.name)
        if not wanted:
            return []
        # The tar is streamed from the exec's frames, never held: exec_run(demux=True) joins
        # the frames with `bytes +=`, quadratic, which took 43 s for one broker's 68 MB of
        # data-log segments.
        api = self.client.api
        try:
            exec_id = api.exec_create(self._container().id, tar_command(wanted))["Id"]
            frames = api.exec_start(exec_id, stream=True, demux=True)
            stdout = (chunk for chunk, _ in frames if chunk)
            reader = io.BufferedReader(_ChunkReader(stdout), _ARCHIVE_CHUNK)
            out = extract_wanted(reader, wanted, dest, _ARCHIVE_CHUNK)
            code = api.exec_inspect(exec_id).get("ExitCode")
        # ValueError: docker-py lost the exec's frame headers ("76 is not a valid stream", seen
        # under load), which cost a run its metadata logs: the directories are streamed instead.
        except (docker.errors.APIError, tarfile.TarError, ValueError):
            return None
        return out if code == 0 and out else None

    def _get_archive(self, path: str) -> tarfile.TarFile:
        container = self._container()
        try:
            stream, _ = container.get_archive(self._kept_at(container, path))
        except docker.errors.NotFound:
            raise ClusterError(f"node {self.name}: no {path}") from None
        return tarfile.open(fileobj=io.BytesIO(b"".join(stream)))

    # Process
    def start(self) -> None:
        self._container().start()

    def stop(self, timeout: float = 30) -> None:
        self._container().stop(timeout=int(timeout))

    def signal(self, sig: signal.Signals) -> None:
        # Signals come from the host: inside its namespace PID 1 ignores SIGKILL and SIGSTOP.
        try:
            self._container().kill(signal=int(sig))
        except docker.errors.APIError as exc:
            raise ClusterError(
                f"node {self.name}: cannot send {sig.name}: {exc.explanation}"
            ) from None

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def state(self) -> dict:
        c = self._container()
        c.reload()
        return c.attrs["State"]

    def is_running(self) -> bool:
        return bool(self.state().get("Running"))

    def is_frozen(self) -> bool:
        return bool(self.state().get("Paused"))

    def is_paused_by_signal(self) -> bool:
        """True when the JVM is stopped by SIGSTOP (process state T), which Docker does not show."""
        try:
            stat = self.exec(["cat", "/proc/1/stat"], timeout=5).stdout
        except ClusterError:
            return False
        fields = stat.rsplit(")", 1)[-1].split()
        return bool(fields) and fields[0] in ("T", "t")

    # Logs
    def logs(self, tail: int | None = None) -> str:
        raw = self._container().logs(tail=tail if tail is not None else "all")
        return raw.decode(errors="replace")
