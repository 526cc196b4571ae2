"""Run directories: `results/<name>/<timestamp>-<seed>/`, and `results/latest` pointing at the
newest, replaced atomically so a reader never sees it missing."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from clusters.errors import ClusterError
from clusters.hold import check_name
from history import strict_json

# results/latest: the link to the newest run.
LATEST = "latest"


def make_run_dir(results_dir: str | Path, name: str, seed: int) -> Path:
    """A new, empty results/<name>/<stamp>-<seed>/; ``name`` is one folder right under the
    results folder, or ClusterError before anything is made (``latest``, the link to the newest
    run, is not a folder of runs)."""
    check_name(name, "--name", "run name")
    results = Path(results_dir)
    base = results / name
    if name == LATEST or ((base.is_symlink() or base.exists()) and not base.is_dir()):
        raise ClusterError(f"--name {name}: {base} is not a folder of runs; choose another name")
    base.mkdir(parents=True, exist_ok=True)
    if base.is_symlink() or base.resolve().parent != results.resolve():
        raise ClusterError(f"--name {name}: {base} is not a folder right under {results}")
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return new_dir(base, f"{stamp}-{seed}")


def new_dir(parent: Path, name: str) -> Path:
    """``parent/name`` made, or ``name-2``, ``name-3``... when it exists: two runs of one seed,
    or two shrinks of one run, within the same second."""
    path = parent / name
    n = 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = parent / f"{name}-{n}"


def point_latest(results_dir: str | Path, run_dir: Path) -> Path:
    results = Path(results_dir)
    link = results / LATEST
    tmp = results / f".latest-{os.getpid()}"
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(run_dir.resolve().relative_to(results.resolve()))
    os.replace(tmp, link)
    return link


def write_json(path: Path, obj: Any) -> None:
    path.write_text(strict_json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
