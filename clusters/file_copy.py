"""Copying chosen files of a node's directories out, the same on Docker and SSH nodes: one
listing run in the node (``LISTING``), then one tar of just the kept files streamed back and
extracted member by member (never a log directory's preallocated 10 MB indexes, never the whole
archive in memory)."""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import IO

from clusters.errors import ClusterError

# One line per directory that exists ("d <path>") and per file in it ("f <path>"); run as
# ``sh -c LISTING sh DIR...``.
LISTING = (
    'for d; do [ -d "$d" ] && { echo "d $d"; find "$d" -maxdepth 1 -type f '
    '-printf "f %p\\n"; }; done; :'
)


def listing_command(paths: Sequence[str]) -> list[str]:
    return ["sh", "-c", LISTING, "sh", *paths]


def wanted_files(
    listing: str, paths: Sequence[str], keep: Callable[[str], bool], node: str
) -> dict[PurePosixPath, str]:
    """The kept files of the listing, each with the name of the directory it is copied into;
    ClusterError when none of ``paths`` exists on the node."""
    entries = [line.split(" ", 1) for line in listing.splitlines() if " " in line]
    if not any(kind == "d" for kind, _ in entries):
        raise ClusterError(f"node {node}: no {', '.join(paths)}")
    files = [PurePosixPath(p) for kind, p in entries if kind == "f"]
    return {f: f.parent.name for f in files if keep(f.name)}


def tar_command(wanted: dict[PurePosixPath, str], *options: str) -> list[str]:
    """The tar, run from ``/``, that writes just the wanted files to its standard output."""
    return ["tar", *options, "-cf", "-", "-C", "/", *(str(f).lstrip("/") for f in wanted)]


def extract_wanted(
    stream: IO[bytes], wanted: dict[PurePosixPath, str], dest: Path, bufsize: int = 10240
) -> list[Path]:
    """Each wanted file of the tar ``stream`` as ``dest/<directory name>/<file>``; the paths."""
    out: list[Path] = []
    with tarfile.open(fileobj=stream, mode="r|", bufsize=bufsize) as tar:
        for member in tar:
            path = PurePosixPath("/", member.name)
            if not member.isfile() or path not in wanted:
                continue
            member.name = f"{wanted[path]}/{path.name}"
            tar.extract(member, dest, filter="data")
            out.append(dest / member.name)
    return out
