"""requirements.lock is what setup installs: it must pin every dependency pyproject.toml names
(runtime and dev), each to one version with hashes, so that every night installs the same."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _locked() -> dict[str, str]:
    text = (ROOT / "requirements.lock").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, flags=re.M)
    return {name.lower().replace("_", "-"): version for name, version in pins}


def test_every_dependency_of_pyproject_is_pinned_in_the_lock():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    locked = _locked()
    assert [r for r in wanted if _name(r) not in locked] == []


def test_every_pin_carries_hashes():
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", (ROOT / "requirements.lock").read_text())
    pins = [b for b in blocks if re.match(r"[A-Za-z0-9_.-]+==", b)]
    assert len(pins) == len(_locked()) > 40
    assert all("--hash=sha256:" in b for b in pins)


def test_pandas_stays_below_3():
    """PySpark 4.3 warns on pandas >= 3."""
    assert int(_locked()["pandas"].split(".")[0]) < 3
