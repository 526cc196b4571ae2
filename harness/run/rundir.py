"""Run directories: `results/<name>/<timestamp>-<seed>/`, and `results/latest` pointing at the
newest, replaced atomically so a reader never sees it missing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def make_run_dir(results_dir: str | Path, name: str, seed: int) -> Path:
    base = Path(results_dir) / name
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    run_dir = base / f"{stamp}-{seed}"
    n = 1
    while True:
        try:
            run_dir.mkdir()
            break
        except FileExistsError:  # two runs of one seed within a second
            n += 1
            run_dir = base / f"{stamp}-{seed}-{n}"
    return run_dir


def point_latest(results_dir: str | Path, run_dir: Path) -> Path:
    results = Path(results_dir)
    link = results / "latest"
    tmp = results / f".latest-{os.getpid()}"
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(run_dir.resolve().relative_to(results.resolve()))
    os.replace(tmp, link)
    return link


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
