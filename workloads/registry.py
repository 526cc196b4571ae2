"""Workloads by the name ``--workload`` and specs use, and the run options they declare."""

from __future__ import annotations

from history.options import Option
from workloads.admin import AdminWorkload
from workloads.api import WorkloadKind
from workloads.queue import QueueWorkload
from workloads.share import ShareWorkload

# The order is the order a spec error lists them in.
WORKLOADS: dict[str, WorkloadKind] = {
    w.NAME: w for w in (QueueWorkload, AdminWorkload, ShareWorkload)
}


def _options() -> tuple[Option, ...]:
    by_name: dict[str, Option] = {}
    for kind in WORKLOADS.values():
        for o in kind.OPTIONS:
            # Two kinds may share an option (the same declaration), never differ on one.
            if by_name.setdefault(o.name, o) != o:
                raise ValueError(f"workload option '{o.name}' is declared twice, differently")
    return tuple(by_name.values())


# Every workload kind's options, in the registry's order: any spec may give any of them (each
# kind's ``check`` refuses its own where they cannot run).
WORKLOAD_OPTIONS: tuple[Option, ...] = _options()
