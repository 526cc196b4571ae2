"""What every checker returns: findings a Kafka engineer can verify by hand from the ops quoted."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One anomaly. `ops` are history indices (completions, or invocations that never completed).

    `tolerated` says why this finding does not make the run invalid (None: it does), and
    `unknown` marks findings that say "we cannot tell" rather than "this is wrong".
    """

    kind: str
    key: int | None
    ops: tuple[int, ...]
    explanation: str
    data: dict[str, Any] = field(default_factory=dict, compare=False)
    tolerated: str | None = None
    unknown: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ops"] = list(self.ops)
        return d

    def sort_key(self) -> tuple[Any, ...]:
        return (self.kind, -1 if self.key is None else self.key, self.ops, self.explanation)


def secs(nanos: int | None) -> str:
    """Run time as humans read it in findings."""
    return "never" if nanos is None else f"{nanos / 1e9:.3f} s"
