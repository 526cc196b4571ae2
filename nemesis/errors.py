"""The errors nemeses raise for a fault that cannot be applied as asked."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from clusters.errors import ClusterError


class NemesisError(ClusterError):
    """One clear sentence for a person: printed alone by the CLI, recorded as the step's error."""


class NotApplied(NemesisError):
    """The step changed nothing on any node: the history records it as ``fail``, not ``info``.

    Plans are the same on every machine, so a step this one cannot carry out (a kernel without
    netem, no single active controller at that moment) is a definite failure of that step, and
    the run goes on.
    """


@contextmanager
def before_touching() -> Iterator[None]:
    """Marks the part of a fault that only reads: its NemesisErrors become NotApplied."""
    try:
        yield
    except NotApplied:
        raise
    except NemesisError as exc:
        raise NotApplied(str(exc)) from None
