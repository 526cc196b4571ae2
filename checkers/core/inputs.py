"""Everything a checker may read of one run, each read at most once and only when one asks.

A run is a history (history.jsonl, rebuilt into history.parquet when older) and the files beside
it: cluster.json, plan.json, and the logs the harness collected (metadata/, data/, logs/). The
history is read in one pass (checkers/scan/load.py) for every checker at once: its element arrays
(local engine), its queue ops as arrays, and the op rows some checker reads whole (its `Needs`
name them by f or by process). Checkers name what they read (`Needs.inputs`, the constants
below) and `RunInputs` refuses them anything else, so a checker's needs are what it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from tempfile import TemporaryDirectory, mkdtemp
from types import TracebackType
from typing import Any, TypeVar

import pyarrow as pa

from checkers.core.checker_result import CheckerResult
from checkers.core.run_files import read_cluster, read_generator
from checkers.families.data_log.check import DataLogRead, read_run_data
from checkers.families.data_log.sends import Sends
from checkers.families.metadata_log.check import (
    LEASE_COLUMNS,
    MetadataLogRead,
    SendRows,
    read_run_metadata,
)
from checkers.families.observer_samples import MetadataInput, observe_samples_from_ops
from checkers.families.queue.arrays import ElemArrays
from checkers.families.queue.dispatch import ENGINE_CHOICES, engine_name
from checkers.families.queue.spill import SpilledElements
from checkers.families.queue.vector import workers
from checkers.families.zk_controller.parse import Event, read_logs
from checkers.scan.load import Loaded, load
from history.columnar import has_op_fields, is_in, read_header
from history.errors import HistoryError
from history.format import (
    JSONL_NAME,
    MIGRATION,
    NEMESIS,
    OBSERVER,
    PARQUET_NAME,
    UPGRADE,
    after_abort_rule,
)
from history.names import Names
from history.stream import convert, summary_of

T = TypeVar("T")

# What a checker may name in Needs.inputs.
HISTORY = "history"  # the queue op arrays, the element count, op rows read whole (`op_rows`)
ELEMENTS = "elements"  # the element arrays (local engine only), handed over once
OBSERVED = "observed"  # observer samples and the faults around them (observer_samples.py)
CLUSTER = "cluster.json"
PLAN = "plan.json"  # its generator: how clients chose and ran their operations
METADATA_LOGS = "metadata/"  # the controllers' and brokers' decoded __cluster_metadata
DATA_LOGS = "data/"  # the brokers' decoded partition logs
BROKER_LOGS = "logs/"  # the nodes' stdout.log
INPUTS = (HISTORY, ELEMENTS, OBSERVED, CLUSTER, PLAN, METADATA_LOGS, DATA_LOGS, BROKER_LOGS)

# The op rows observer samples are made of: the samples, and the faults, migration and upgrade
# steps that may excuse what a sample says.
OBSERVED_PROCESSES = (OBSERVER, NEMESIS, MIGRATION, UPGRADE)

# What `--engine` accepts; the queue engines' one dispatch resolves it (auto: local unless a
# Spark master is named, docs/checkers.md).
ENGINES = ENGINE_CHOICES


@dataclass(frozen=True)
class Needs:
    """What a checker reads of a run. The history is read once, before the first checker that
    reads it runs, with the op rows every checker asks for (`fs`, `processes`) decoded whole
    (every other row narrow: history.columnar.CHECK_COLUMNS)."""

    inputs: frozenset[str] = frozenset()  # members of INPUTS
    fs: tuple[str, ...] = ()  # op rows read with every column, by f
    processes: tuple[str, ...] = ()  # op rows read with every column, by process
    after: tuple[str, ...] = ()  # earlier checkers whose results it reads (`result`)


class RunInputs:
    """One run's inputs, read lazily and kept. Open with `RunInputs.open(path, ...)` and use
    as a context manager (the thread pool is shut down on leaving). Where the run is
    (`run_dir`, `has_dir`), how it is checked (`engine`, `pool`, `spark_session`) and the
    history's header (`header`, `after_abort`, `names`) answer any checker; everything else
    only a checker whose Needs name it."""

    def __init__(
        self,
        run_dir: Path,
        jsonl: Path | None,
        parquet: Path,
        engine: str = "local",
        spark_master: str | None = None,
        spark: Any = None,
    ) -> None:
        self.run_dir = run_dir
        self.parquet = parquet
        self.history_name = str(jsonl or parquet)  # what results.json calls the history
        self.engine = engine  # "local", "spark" or "reference"
        self.notes: list[str] = []  # what reading the history had to say
        self.results: dict[str, CheckerResult] = {}  # the checkers' results so far, by name
        self._spark_master, self._spark = spark_master, spark
        self._started_spark = False  # a session this check started (and stops), not one given
        self._cache: dict[Any, Any] = {}
        self._fs: tuple[str, ...] = ()
        self._processes: tuple[str, ...] = ()
        self._elements = False
        self._pool: ThreadPoolExecutor | None = None
        self._scratch: TemporaryDirectory[str] | None = None
        self._serving: tuple[str, Needs] | None = None
        self.header: dict[str, Any] = {}
        self.after_abort = ""  # the history writer's poll rule after aborts (history.format)
        self.names: Names | None = None  # Jepsen's names for keys and values, if it has them

    @classmethod
    def open(
        cls,
        path: str | Path,
        engine: str = "auto",
        spark_master: str | None = None,
        spark: Any = None,
    ) -> RunInputs:
        """A run directory or a history file (history.jsonl, .parquet, Jepsen's .edn); the
        Parquet form is (re)built from the JSONL when missing or older, and its header read.
        Raises HistoryError for a history that cannot be read, ValueError for an engine not in
        ENGINES."""
        chosen = engine_name(engine, spark_master)
        run_dir, jsonl, parquet = _locate(path)
        inputs = cls(run_dir, jsonl, parquet, chosen, spark_master, spark)
        inputs.parquet = _parquet_for(jsonl, parquet, inputs.notes)
        inputs.header = read_header(inputs.parquet)
        inputs.after_abort = after_abort_rule(inputs.header)
        inputs.names = _names(inputs.parquet, inputs.header)
        return inputs

    def __enter__(self) -> RunInputs:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        if self._scratch is not None:
            self._scratch.cleanup()
        if self._started_spark:
            # A Connect server keeps a client's session until it is released or times out; a
            # cluster keeps the application's executors until its driver goes.
            self._spark.stop()

    # -- what checkers may ask before anything is read -------------------------------------

    def has_dir(self, name: str) -> bool:
        return (self.run_dir / name).is_dir()

    def has_op_fields(self) -> bool:
        """Might some op carry a consumer-group or foreign-record field (history.format
        OP_FIELDS)? From the Parquet file's metadata alone, so that a checker asks for the op
        rows that hold them only when there can be some."""
        return self._once(("has_op_fields",), lambda: has_op_fields(self.parquet))

    def plan(self, needs: Iterable[Needs]) -> None:
        """The op rows the one read of the history decodes whole: every checker's, asked up
        front so that the history is read once."""
        needs = list(needs)
        unknown = {i for n in needs for i in n.inputs} - set(INPUTS)
        if unknown:
            raise ValueError(f"Needs name {sorted(unknown)}: not among {INPUTS}")
        fs = [f for n in needs for f in n.fs]
        processes = [p for n in needs for p in n.processes]
        if any(OBSERVED in n.inputs for n in needs):
            processes += OBSERVED_PROCESSES
        self._fs = tuple(dict.fromkeys(fs))
        self._processes = tuple(dict.fromkeys(processes))
        self._elements = any(ELEMENTS in n.inputs for n in needs) and self.engine == "local"

    @contextmanager
    def serving(self, name: str, needs: Needs) -> Iterator[None]:
        """Meanwhile, answer only what checker `name` declared in `needs`."""
        self._serving = (name, needs)
        try:
            yield
        finally:
            self._serving = None

    def _use(self, what: str) -> None:
        if self._serving is not None and what not in self._serving[1].inputs:
            raise RuntimeError(f"checker {self._serving[0]!r} reads {what} but its needs omit it")

    def _once(self, key: Any, read: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = read()
        return self._cache[key]  # type: ignore[no-any-return]

    # -- the history ----------------------------------------------------------------------

    @property
    def history(self) -> Loaded:
        """The history as the checks read it: queue ops as arrays, the element count (and
        the element arrays, for the local engine, until `take_elements`), the wide op rows."""
        self._use(HISTORY)
        return self._loaded()

    def _loaded(self) -> Loaded:
        return self._once(
            HISTORY,
            lambda: load(
                self.parquet,
                list(self._fs),
                list(self._processes),
                elements=self._elements,
                pool=self.pool,
                spill_to=self._spill_dir,
            ),
        )

    def _spill_dir(self) -> Path:
        """A directory for a streamed history's spill (checkers/scan/load.py), removed when the
        check ends: in the system's temporary directory (TMPDIR), not beside the run."""
        if self._scratch is None:
            self._scratch = TemporaryDirectory(prefix="kchaos-spill-")
        return Path(mkdtemp(prefix="elements-", dir=self._scratch.name))

    def take_elements(self) -> ElemArrays | SpilledElements:
        """The element arrays, handed over: from then on the caller holds them alone, so that
        they are freed as soon as it is done (at 10M ops they are the largest thing held). A
        history above load.STREAM_ABOVE gives its spilled elements instead, checked bucket by
        bucket."""
        self._use(ELEMENTS)
        loaded = self._loaded()
        held: ElemArrays | SpilledElements | None = loaded.elements
        if held is None:
            held = loaded.spilled
        if held is None:
            raise RuntimeError("no element arrays: already taken, or not the local engine")
        loaded.elements = loaded.spilled = None
        return held

    def op_table(self, fs: Iterable[str] = (), processes: Iterable[str] = ()) -> pa.Table:
        """The op rows with f in `fs`, or else with process in `processes`, every column, in
        history order. Only the rows some checker's Needs asked for were read whole."""
        self._use(HISTORY)
        return self._op_table(tuple(fs), tuple(processes))

    def op_rows(
        self, fs: Iterable[str] = (), processes: Iterable[str] = ()
    ) -> list[dict[str, Any]]:
        """`op_table` as dicts (kept: several checkers read the same rows)."""
        self._use(HISTORY)
        return self._op_rows(tuple(fs), tuple(processes))

    def _op_rows(self, fs: tuple[str, ...], processes: tuple[str, ...]) -> list[dict[str, Any]]:
        return self._once(
            ("rows", fs, processes), lambda: self._op_table(fs, processes).to_pylist()
        )

    def _op_table(self, fs: tuple[str, ...], processes: tuple[str, ...]) -> pa.Table:
        unread = [x for x in fs if x not in self._fs]
        unread += [x for x in processes if x not in self._processes]
        if unread:
            raise RuntimeError(f"op rows {unread} were not asked for in any checker's Needs")
        wide = self._loaded().wide_ops
        column, values = ("f", fs) if fs else ("process", processes)
        return wide.filter(is_in(wide.column(column), list(values)))

    @property
    def sends(self) -> Sends:
        """The history's sends as arrays (acknowledged writes, who sent each value), read
        from its send element rows once, for the data-log checks."""
        self._use(HISTORY)
        return self._once(("sends",), lambda: Sends.from_parquet(self.parquet))

    def send_rows(self, any_ok: bool = True, values: bool = False) -> SendRows:
        """The ok send and txn completions with their invocations' walls, read from the history
        only when the lease rules ask for those inside some fence's window (metadata_log/
        check.py SendRows); `any_ok`: whether there is any; `values`: with their values' JSON."""
        self._use(HISTORY)
        return SendRows(
            self.parquet, any_ok, [*LEASE_COLUMNS, "value_json"] if values else LEASE_COLUMNS
        )

    @property
    def observed(self) -> MetadataInput:
        """Observer samples, and the faults and migration steps around them."""
        self._use(OBSERVED)
        return self._once(
            OBSERVED, lambda: observe_samples_from_ops(self._op_rows((), OBSERVED_PROCESSES))
        )

    # -- the files beside it --------------------------------------------------------------

    @property
    def cluster(self) -> dict[str, Any]:
        """cluster.json; {} when absent or unreadable (run_files.read_cluster)."""
        self._use(CLUSTER)
        return self._once(CLUSTER, lambda: read_cluster(self.run_dir))

    @property
    def generator(self) -> dict[str, Any] | None:
        """plan.json's generator; None without a readable plan (run_files.read_generator)."""
        self._use(PLAN)
        return self._once(PLAN, lambda: read_generator(self.run_dir))

    @property
    def metadata_logs(self) -> MetadataLogRead | None:
        """metadata/ as read; None when the run has none."""
        self._use(METADATA_LOGS)
        return self._once(METADATA_LOGS, lambda: read_run_metadata(self.run_dir))

    @property
    def data_logs(self) -> DataLogRead | None:
        """data/ as read; None when the run has none."""
        self._use(DATA_LOGS)
        return self._once(DATA_LOGS, lambda: read_run_data(self.run_dir))

    def broker_logs(self, nodes: list[str]) -> dict[str, list[Event]]:
        """The events of `logs/<node>/stdout.log` of each named node that has one."""
        self._use(BROKER_LOGS)
        return self._once((BROKER_LOGS, tuple(nodes)), lambda: read_logs(self.run_dir, nodes))

    # -- earlier checkers, and the means to check ------------------------------------------

    def result(self, name: str) -> CheckerResult:
        """An earlier checker's result: only one the serving checker names in Needs.after."""
        if self._serving is not None and name not in self._serving[1].after:
            raise RuntimeError(f"checker {self._serving[0]!r} reads {name!r} but its needs omit it")
        return self.results[name]

    @property
    def pool(self) -> ThreadPoolExecutor:
        """Threads for the history's read and for batches of keys."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(workers())
        return self._pool

    def spark_session(self) -> Any:
        """The SparkSession given, else one started now (local[*] unless a master was named)."""
        if self._spark is None:
            from checkers.scan.spark_session import spark_session

            self._spark = spark_session(self._spark_master)
            self._started_spark = True
        return self._spark


def _locate(path: str | Path) -> tuple[Path, Path | None, Path]:
    """(run_dir, jsonl or None, parquet) for a run directory or a history file."""
    p = Path(path)
    if p.is_dir():
        jsonl = p / JSONL_NAME
        return p, jsonl if jsonl.exists() else None, p / PARQUET_NAME
    if not p.exists():
        raise HistoryError(p, None, "no such history file or run directory")
    if p.suffix == ".parquet":
        return p.parent, None, p
    if p.suffix == ".edn":  # Jepsen's Kafka workload: converted to history.jsonl beside it
        from history.edn import convert_edn_file

        return p.parent, convert_edn_file(p), p.parent / PARQUET_NAME
    return p.parent, p, p.parent / PARQUET_NAME


def _parquet_for(jsonl: Path | None, parquet: Path, notes: list[str]) -> Path:
    if jsonl is None:
        if not parquet.exists():
            raise HistoryError(parquet, None, f"no {JSONL_NAME} or {PARQUET_NAME} here")
        # A history built from a JVM's side files (history/build.py) is its Parquet file alone:
        # what its build dropped (torn tails) and left open is in its summary.
        summary = summary_of(parquet)
        if summary is not None:
            notes.extend(replace(summary, path=str(parquet)).notes())
        return parquet
    # The JSONL is the record; the Parquet copy is used as it is only when the streamed
    # conversion wrote it from this very file (its summary names the JSONL's size and mtime),
    # and so checked every line of it as the conversion does. Any other (older than the record,
    # written before the columnar form carried the op fields, or by write_parquet) is rebuilt.
    summary = summary_of(parquet)
    if summary is not None and summary.built:
        # Built from a JVM's side files: the Parquet file is the record, and a history.jsonl
        # beside it is a copy derived from it (kchaos history) or what a build cut short left
        # of the recorder's part; neither replaces it.
        notes.extend(replace(summary, path=str(parquet)).notes())
        return parquet
    if summary is None or not summary.describes(jsonl):
        summary = convert(jsonl, parquet)
    # Named as it is found now (a run directory may have been moved since).
    notes.extend(replace(summary, path=str(jsonl)).notes())
    return parquet


def _names(parquet: Path, header: dict[str, Any]) -> Names | None:
    try:
        names = Names.from_header(header)
    except ValueError as e:
        raise HistoryError(parquet, None, f"header: {e}") from None
    return names or None
