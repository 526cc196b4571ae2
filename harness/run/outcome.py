"""What a run returns to the command that started it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunResult:
    run_dir: Path
    seed: int
    exit_code: int
    summary: dict[str, Any] = field(default_factory=dict)
