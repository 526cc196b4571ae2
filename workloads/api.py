"""The workload interface the harness drives: everything one kind of workload brings to a run.

A workload kind is a class, named in ``workloads/registry.py``. It declares its run options
(``OPTIONS``, ``history/options.py``: the command line, spec checks and plan.json's spec come
from them) and refuses the combinations of them that cannot run (``check``). Before a run it
states, from the run's options, its generator parameters (written into plan.json, so a replay
uses them as they were); from those, the harness asks it what the history's header declares,
how many process ids each worker slot owns (lanes), whether its history is flushed by time,
the feature levels the cluster is formatted with and the properties its nodes need. During a
run an instance, built from those parameters and the live topology, sets up what its clients
need, makes one client per process (``workloads/client.py``), tells the nemeses what only the
clients know (partition leaders), and at the end reads back everything it wrote, recording
those reads as operations too.

As in Jepsen, what to do is data (the plan's generator) and the client does it; the harness
interprets the plan and owns the history. A workload contributes no timed steps of its own: steps
that run beside the clients (the ZooKeeper-to-KRaft migration) come from the topology, which a
workload runs the same on whatever it is.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from clusters.client_net import ClientNet
from clusters.topology import Topology
from history.options import Option, Values
from workloads.client import Client


class Options(Protocol):
    """The run options a workload's generator may read (``history.options.Values``): its own
    options by name, and the harness's facts."""

    workload: str
    topology: str
    version: str
    releases: tuple[str, ...]


class Workload(Protocol):
    """One run's workload: shared state of its clients, from setup to the final reads."""

    def setup(self) -> None:
        """Makes the cluster ready for the clients (topics, coordinators); raises if it cannot."""
        ...

    def setup_says(self) -> str:
        """What ``setup`` does, in a line for the person running."""
        ...

    def client(self, process: int, rng: random.Random) -> Client: ...

    def hints(self) -> dict[str, Any]:
        """Client-side facts a nemesis selector may use (``nemesis.api.FaultContext.hints``)."""
        ...

    def final(
        self, new_process: Callable[[], int], record: Callable[..., Any], timeout: float
    ) -> dict[str, Any]:
        """Reads back what the run wrote, recording each read; bounded by ``timeout``. The
        outcome goes into run.json under ``FINAL_KEY``; ``complete`` says all was read."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Clocked(Protocol):
    """An optional capability of a workload whose clients write times into op fields (a
    consumer's rebalance listener, docs/history.md): ``clock()`` is the history's clock,
    monotonic nanoseconds since the run started (harness/run/recorder.py ``Recorder.now_ns``). The
    harness sets it right after constructing the workload, before ``setup``; until then it is
    the workload's own stand-in."""

    clock: Callable[[], int]


@runtime_checkable
class SizedFinal(Protocol):
    """An optional capability of a workload whose final reads grow with what the run wrote (a
    pipelined queue run acknowledges millions of sends): ``final_timeout`` is the bound its
    ``final`` gets for a run whose ``--final-timeout`` is ``base``, asked once the clients have
    stopped. The harness's hang budget for the final reads grows with it."""

    def final_timeout(self, base: float) -> float: ...


class SideRecorder(Protocol):
    """What a writer of operations beside the harness's recorder needs of it (a JVM writing
    its own op lines into a side file, history/merge.py): where side files go, the history's
    zero on CLOCK_MONOTONIC, and a way to count the completions it wrote."""

    @property
    def side_dir(self) -> Path: ...

    @property
    def t0_ns(self) -> int: ...

    def add_counts(self, counts: dict[str, int]) -> None: ...


@runtime_checkable
class SideRecorded(Protocol):
    """An optional capability of a workload whose final reads write their operations beside
    the recorder (the queue workload's Java client: docs/history.md, "Final reads"): the harness
    sets ``side_recorder`` right after constructing the workload."""

    side_recorder: SideRecorder | None


@runtime_checkable
class ClientNetted(Protocol):
    """An optional capability of a workload whose slots' clients can each run in a network of
    their own (clusters/client_net.py; the generator's ``client_nets``, for nemesis/client.py
    ``isolate``): the harness sets ``client_nets`` (slot -> its network) before ``setup``, and
    each slot's client process is started inside its slot's."""

    client_nets: Mapping[int, ClientNet] | None


class WorkloadKind(Protocol):
    """A workload class: what is known of it before any cluster exists."""

    NAME: str
    # Its run options (history/options.py); the same name in two kinds is one option.
    OPTIONS: tuple[Option, ...]
    # Where run.json keeps the outcome of ``final``, and what the run says before it.
    FINAL_KEY: str
    FINAL_SAYS: str

    def check(self, values: Values) -> None:
        """Raises OptionError for a combination of options that cannot run. Every kind's check
        sees every spec, whichever workload it names (a kind may refuse its options elsewhere)."""
        ...

    def generator(self, options: Options) -> dict[str, Any]:
        """The workload's own generator parameters; the harness adds rate and concurrency."""
        ...

    def history_header(self, gen: dict[str, Any]) -> dict[str, Any]:
        """What the history's header declares of these clients (docs/history.md)."""
        ...

    def lanes(self, gen: dict[str, Any]) -> int:
        """Process ids per worker slot (harness/run/workers.py): 1 unless a client has several
        operations in flight at once."""
        ...

    def flush_by_time(self, gen: dict[str, Any]) -> bool:
        """Is the history written too fast to flush each line (thousands a second)?"""
        ...

    def format_features(self, gen: dict[str, Any]) -> dict[str, int]:
        """Feature levels the KRaft nodes' storage is formatted with; {}: the release's own."""
        ...

    def node_properties(self, gen: dict[str, Any]) -> dict[str, str]:
        """What every Kafka node's server.properties needs for these clients from the start
        (the share workload's acquisition lock); {}: nothing."""
        ...

    def transactional(self, values: Values) -> bool:
        """Do its clients run transactions (a transaction coordinator to aim a fault at)?"""
        ...

    def final_sentence(self, outcome: dict[str, Any]) -> str:
        """The final outcome in a few words, for the line ``kchaos run`` ends with."""
        ...

    def __call__(
        self, gen: dict[str, Any], topology: Topology, seed: int, run_id: str
    ) -> Workload: ...


class KindBase:
    """What a workload kind answers when it has nothing to say: subclass it and override."""

    OPTIONS: ClassVar[tuple[Option, ...]] = ()
    # What the history's header always declares of these clients (docs/history.md).
    HISTORY_HEADER: ClassVar[dict[str, Any]] = {}

    @staticmethod
    def check(values: Values) -> None:
        return None

    @classmethod
    def history_header(cls, gen: dict[str, Any]) -> dict[str, Any]:
        return dict(cls.HISTORY_HEADER)

    @staticmethod
    def lanes(gen: dict[str, Any]) -> int:
        return 1

    @staticmethod
    def flush_by_time(gen: dict[str, Any]) -> bool:
        return False

    @staticmethod
    def format_features(gen: dict[str, Any]) -> dict[str, int]:
        return {}

    @staticmethod
    def node_properties(gen: dict[str, Any]) -> dict[str, str]:
        return {}

    @staticmethod
    def transactional(values: Values) -> bool:
        return False
