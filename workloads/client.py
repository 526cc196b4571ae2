"""What the interpreter needs from a workload's client, and how an attempt's outcome is told.

A client belongs to one process and does one operation at a time. `apply` never raises for
anything the cluster does: it returns a Completion whose type says what is known (Jepsen's rule:
`fail` only when the operation definitely did not happen, `info` when it may have).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Completion:
    type: str  # "ok", "fail" or "info"
    value: Any
    error: str | None = None
    node: str | None = None
    # The outcome is known, but the client's own state is not (a consumer whose position could
    # not be restored): the process retires, as after `info`.
    retire: bool = False
    # Further fields of the completion's line (docs/history.md: a consumer's `rebalance`,
    # `commit`, `commit_error`, `foreign`), written after the standard ones in this order; None
    # or empty: none, and the line is as it was without them. A name the history already uses
    # (`time`, `node`, ...) is refused when it is recorded (harness/run/recorder.py).
    extra: dict[str, Any] | None = None


@dataclass
class Invocation:
    f: str
    value: Any
    node: str | None = None


class Client(Protocol):
    process: int
    # What opens the client (a consumer's assign or subscribe), recorded before its first
    # operation; None: nothing to open.
    setup_op: Invocation | None

    def open(self, op: Invocation) -> Completion: ...

    def next_op(self) -> Invocation: ...

    def apply(self, op: Invocation) -> Completion: ...

    def close(self) -> None: ...
