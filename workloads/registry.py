"""Workloads by the name ``--workload`` and specs use."""

from __future__ import annotations

from workloads.admin import AdminWorkload
from workloads.api import WorkloadKind
from workloads.queue import QueueWorkload

# The order is the order a spec error lists them in.
WORKLOADS: dict[str, WorkloadKind] = {w.NAME: w for w in (QueueWorkload, AdminWorkload)}
