"""The run interpreter: carries out a plan against a fresh cluster and owns the history.

Order of a run: cluster up, nemesis preparation, workload setup, clients + observer + nemesis
(+ the plan's planned steps) for the time limit, heal everything, wait until the cluster is
observed ready again, final reads, then the ending every path shares: heal, keep the history
(Parquet copy), collect logs and metadata, check, cluster down. Healing and teardown happen on
every path out (normal end, error, Ctrl-C), and the history is kept whatever happened.

The parts live beside it: clients in harness/run/workers.py, faults in harness/run/faults.py, the
ending's steps in harness/run/wrapup.py; what a workload brings comes from its registry entry
(workloads/registry.py), and what a planned step family brings from its own (steps/registry.py),
never from their names.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.families.liveness.bounds import Bounds
from clusters.client_net import ClientNetworks, refusal
from clusters.cluster import ClusterHandle, ClusterInfo, UpOptions
from clusters.errors import ClusterError
from clusters.handles import open_cluster
from clusters.hold import ClusterRemoved, Hold, holding
from clusters.kafka_dist import KafkaDist, ensure_dist, parse_version
from clusters.topology import build_topology
from harness.exit_codes import BAD_INPUT_EXIT, CLUSTER_REMOVED_EXIT, INTERRUPTED_EXIT
from harness.plan import PLAN_NAME, Plan
from harness.run.faults import FaultDriver, heal, lasting_of, prepare, record_kept_down
from harness.run.outcome import RunResult
from harness.run.phases import Phases
from harness.run.progress import wait_out
from harness.run.readiness import Lasting, wait_observed_ready
from harness.run.recorder import Recorder
from harness.run.rundir import make_run_dir, point_latest, write_json
from harness.run.supervisor import run_supervised
from harness.run.workers import Clients, ProcessIds
from harness.run.wrapup import check_run, collect_and_tear_down, keep_history, not_checked
from history.format import JSONL_NAME
from nemesis.api import FaultContext, Nemesis
from nemesis.items import packages
from nemesis.registry import build
from nemesis.targets import CLIENT_NETS_HINT
from steps.family import Stage
from steps.recorded import RecordedSteps, stop_and_report
from steps.registry import FAMILIES, node_properties
from workloads.api import ClientNetted, Clocked, SideRecorded, SizedFinal, Workload
from workloads.client_procs import wants_networks
from workloads.observe import Observer
from workloads.registry import WORKLOADS

__all__ = ["Run"]

QUIESCE_TIMEOUT_S = 120.0
# Restarting every node at once (the clock's preparation) on two busy cores takes longer.
PREPARE_READY_TIMEOUT_S = 300.0
# A worker finishing its last operation after the time limit is bounded by the client timeouts.
WORKER_JOIN_S = 40.0
# How far past the after-heal bound the observer goes on with --liveness fail: a sample or two.
AFTER_HEAL_MARGIN_S = 3.0
# What a SIGKILL of a pipelined run may lose of its history's end, seconds.
PIPELINED_FLUSH_S = 0.2
# What each phase may take before the supervisor (harness/run/supervisor.py) takes the client host
# for hung, kills it and ends the run itself. Generous: they catch a hang, not a slow cluster.
BRING_UP_BUDGET_S = 1200.0
SETUP_BUDGET_S = PREPARE_READY_TIMEOUT_S + 600.0
# Stopping the migration or upgrade driver waits for the step in flight (a restart and its
# readiness) to finish.
STEPS_STOP_BUDGET_S = 900.0
FINAL_BUDGET_S = QUIESCE_TIMEOUT_S + 600.0
# Collection decodes metadata logs in the containers; a large history may be checked on Spark.
ENDING_BUDGET_S = 3600.0


@dataclass
class Up:
    """The cluster as it came up, the handles nemeses act on, and the history being recorded."""

    info: ClusterInfo
    ctx: FaultContext
    recorder: Recorder


@dataclass
class Live:
    """What a run has started so far. Each part is None until it exists, so that the ending,
    from wherever the run got to, stops, heals and closes exactly what is there."""

    run_dir: Path
    cluster: ClusterHandle
    up: Up | None = None
    workload: Workload | None = None
    observer: Observer | None = None
    faults: FaultDriver | None = None
    # The planned steps' drivers started so far, by family key, in the order they started.
    steps: dict[str, RecordedSteps] = field(default_factory=dict)
    clients: Clients | None = None
    # The cluster, once it gave the run's clients networks of their own (client isolate).
    client_nets: ClientNetworks | None = None
    healed: list[dict[str, Any]] | None = None
    # Whether the cluster under the run's name is the run's own to tear down: not one it found.
    made: bool = False


class Run:
    """One plan carried out: ``prepare`` makes the run directory, ``execute`` does the rest."""

    def __init__(
        self,
        plan: Plan,
        say: Callable[[str], None] = print,
        show_progress: bool = True,
        replay_of: str | None = None,
        nemeses: dict[str, Any] | None = None,
        force: bool = False,
        supervise: bool = True,
    ) -> None:
        self.plan = plan
        self.spec = plan.run_spec()
        self.workload_kind = WORKLOADS[self.spec.workload]
        self.say = say
        self.show_progress = show_progress
        self.stop = threading.Event()
        # A pipelined producer owns one process id per send in flight (harness/run/workers.py
        # Lanes).
        self.processes = ProcessIds(
            self.spec.concurrency * self.workload_kind.lanes(self.plan.generator)
        )
        self.summary: dict[str, Any] = {"seed": plan.seed, "replay_of": replay_of}
        # When the heal completed (monotonic s), for the after-heal observation.
        self._healed_at: float | None = None
        self.run_dir: Path | None = None
        self.run_id = ""
        # Given nemeses replace the registry's (tests drive the interpreter with their own).
        self._given_nemeses = nemeses
        self.nemeses: dict[str, Nemesis] = {}
        self.releases: dict[str, KafkaDist] = {}
        # The cluster's hold (clusters/hold.py); --force runs without it when another has it.
        self.force = force
        self.hold: Hold | None = None
        # The run proper in a supervised child process (harness/run/supervisor.py), so that a
        # native crash or hang of the client libraries still ends in a healed, checked run.
        # In-process only where a test drives the interpreter's own steps.
        self.supervise = supervise
        # Where the run is, for the supervisor: phase, its budget, and what exists so far.
        self.on_state: Callable[[dict[str, Any]], None] | None = None
        self._facts: dict[str, Any] = {}
        self.phases = Phases()

    def prepare(self) -> Path:
        """The run directory with spec and plan, before anything touches a cluster."""
        # An unknown package fails here, before any Docker work.
        given = self._given_nemeses
        self.nemeses = given if given is not None else build(packages(self.spec.nemesis))
        run_dir = make_run_dir(self.spec.results_dir, self.spec.run_name, self.plan.seed)
        self.run_dir = run_dir
        self.run_id = f"{self.spec.run_name}/{run_dir.name}"
        write_json(run_dir / "spec.json", self.plan.spec)
        (run_dir / PLAN_NAME).write_text(self.plan.to_json())
        point_latest(self.spec.results_dir, run_dir)
        return run_dir

    def execute(self) -> RunResult:
        """The run, holding its cluster from before anything touches it until it is torn down:
        another run, `cluster down`, `cluster up` or `heal` on it is refused meanwhile."""
        does = "run on it anyway"
        with holding(self.spec.cluster, "kchaos run", self.force, does, self.say) as hold:
            self.hold = hold
            if self.supervise:
                return run_supervised(self)
            return self.run_here()

    def run_here(self) -> RunResult:
        """The run in this process (the supervised child's body)."""
        run_dir = self.run_dir or self.prepare()
        if self.hold is not None:
            self.hold.note_run_dir(run_dir)
        self.say(f"seed {self.plan.seed}; run directory {run_dir}")
        live = Live(run_dir, self._cluster())
        interrupted = False
        error: BaseException | None = None
        started = time.monotonic()
        self._note(phase="bring-up", budget_s=BRING_UP_BUDGET_S)
        try:
            up = self._bring_up(live)
            workload = self._set_up(live, up)
            observer = self._drive(live, up, workload)
            self._read_back(live, up, workload, observer)
        except KeyboardInterrupt:
            interrupted = True
            self.say("interrupted: healing, collecting and keeping the history")
        except BaseException as exc:
            error = exc
        finally:
            if not interrupted:
                error = self._removal(live, error)
            with _second_interrupt_waits(self.say):
                self._finish(live, finished=not interrupted and error is None)
        self.summary["seconds"] = round(time.monotonic() - started, 1)
        self.phases.close()
        self.summary["phases"] = self.phases.record()
        code = self._exit_code(interrupted, error)
        self.summary["exit_code"] = code
        write_json(run_dir / "run.json", self.summary)
        if error is not None:
            raise error
        return RunResult(run_dir, self.plan.seed, code, self.summary)

    def _cluster(self) -> ClusterHandle:
        """Where the run's cluster lives: Docker, or the hosts of an SSH inventory (--hosts)."""
        return open_cluster(self.spec.cluster, self.spec.hosts or None, say=self.say)

    # The run proper, in order ------------------------------------------------------------------
    def _bring_up(self, live: Live) -> Up:
        spec = self.spec
        topo = live.cluster.fixed_topology(spec.quorum_mode) or build_topology(
            spec.topology,
            cluster=spec.cluster,
            subnet=spec.subnet,
            zookeepers=spec.zookeepers,
            quorum=spec.quorum_mode,
            controllers=spec.controllers,
        )
        # Every release the run will roll to is assembled first: an unknown one is refused
        # before any container exists.
        self.releases = {v: ensure_dist(v) for v in spec.releases()}
        if live.cluster.exists():
            # Someone else's (held or not): refused here so that the ending leaves it alone.
            raise ClusterError(
                f"a cluster named '{spec.cluster}' already exists: 'kchaos cluster down --name "
                f"{spec.cluster}' removes it, or choose another --cluster"
            )
        live.made = True
        self._note(made=True)
        self.say(f"bringing up {spec.topology} cluster '{spec.cluster}' (Kafka {spec.version})")
        options = UpOptions(
            spec.version,
            timing=spec.timing,
            # What the steps and the workload's clients need of every node from the start.
            extra_props=self.node_properties() or None,
            # --txn-protocol: the transaction.version the storage is formatted with.
            features=self.workload_kind.format_features(self.plan.generator) or None,
            logs_on_failure=live.run_dir,
            disk_layer=spec.disk_layer_mode,
            disk_writeback_s=spec.disk_writeback,
        )
        info = live.cluster.up(topo, options, say=self.say)
        self.summary["kafka_version"] = info.version
        if len(self.releases) > 1:
            live.cluster.install_releases(list(self.releases.values()), self.say)
        if len(self.releases) > 1:
            self.summary["kafka_versions"] = {v: d.version for v, d in self.releases.items()}
            # The newest release's tools read what every release wrote.
            live.cluster.tools = max(self.releases.values(), key=lambda d: parse_version(d.version))
        ctx = FaultContext(topology=info.topology, nodes=live.cluster.nodes(info))
        header = self.workload_kind.history_header(self.plan.generator)
        # Pipelined sends write thousands of lines a second: flushed by time, not per line.
        flush = PIPELINED_FLUSH_S if self.workload_kind.flush_by_time(self.plan.generator) else None
        # And their ops are written beside the history as binary records, built into
        # history.parquet at the end with no JSONL to parse (docs/history.md, "Pipelined sends").
        rec = Recorder(
            live.run_dir / JSONL_NAME,
            self.run_id,
            header=header,
            flush_seconds=flush,
            sends_beside=flush is not None,
        )
        live.up = Up(info, ctx, rec)
        self._note(history=True)
        return live.up

    def _set_up(self, live: Live, up: Up) -> Workload:
        """The nemeses' preparation, then the workload's setup, before any client starts."""
        self._note(phase="setup", budget_s=SETUP_BUDGET_S)
        workload = self.workload_kind(
            self.plan.generator, up.info.topology, self.plan.seed, self.run_id
        )
        live.workload = workload
        if isinstance(workload, Clocked):
            # Times its clients write into op fields are on the history's own clock.
            workload.clock = up.recorder.now_ns
        if isinstance(workload, SideRecorded):
            # Final reads that write their ops beside the recorder (the Java client's).
            workload.side_recorder = up.recorder
        if wants_networks(self.plan.generator):
            self._give_client_nets(live, up, workload)
        self._prepare_nemeses(live.cluster, up, up.ctx)
        self.say(workload.setup_says())
        workload.setup()
        return workload

    def _give_client_nets(self, live: Live, up: Up, workload: Workload) -> None:
        """Each slot's client a network of its own (client isolate), for the workload to start
        its clients in and the nemesis to cut; removed as the run ends."""
        cluster = live.cluster
        refused = refusal(cluster)
        if refused is not None or not isinstance(workload, ClientNetted):
            raise ClusterError(refused or f"workload {self.spec.workload} has no client networks")
        assert isinstance(cluster, ClientNetworks)
        live.client_nets = cluster
        nets = cluster.client_nets(up.info, range(self.spec.concurrency))
        workload.client_nets = nets
        up.ctx.hints[CLIENT_NETS_HINT] = nets
        self.say(f"client networks: one per worker slot ({len(nets)}) on the cluster's network")

    def _prepare_nemeses(self, dc: ClusterHandle, up: Up, ctx: FaultContext) -> None:
        if prepare(self.nemeses, ctx, up.recorder, self.say):
            self._wait_ready(dc, up.info, "after preparing the nodes", PREPARE_READY_TIMEOUT_S)

    def _drive(self, live: Live, up: Up, workload: Workload) -> Observer:
        """Observer, faults, planned steps and clients for the time limit; then no new step begins
        and every client finishes its operation in flight. The observer goes on."""
        spec, rec = self.spec, up.recorder
        budget = spec.time_limit + WORKER_JOIN_S + STEPS_STOP_BUDGET_S
        self._note(phase="workload", budget_s=budget)
        observer = live.observer = Observer(up.info.topology, rec)
        faults = live.faults = FaultDriver(
            self.plan.faults, self.nemeses, up.ctx, rec, workload.hints
        )
        clients = live.clients = Clients(
            workload, rec, self.plan.seed, spec.concurrency, spec.rate, self.processes, self.stop
        )
        observer.start()
        faults.start()
        self._start_steps(live, up)
        clients.start()
        wait_out(spec.time_limit, rec, faults, enabled=self.show_progress)
        self.stop.set()
        self._stop_steps(live)
        self.say("time limit reached: waiting for in-flight operations")
        clients.join(WORKER_JOIN_S)
        if clients.failed_starts:
            self.summary["failed_client_starts"] = clients.failed_starts[:20]
            self.say(f"{len(clients.failed_starts)} client(s) could not be made: see run.json")
        return observer

    def _start_steps(self, live: Live, up: Up) -> None:
        """Each family's driver that has steps in the plan, in the registry's order."""
        stage = Stage(
            up.info,
            self.releases,
            up.recorder,
            nodes=lambda: live.cluster.nodes(up.info),
            started_on=lambda: self._started_on(live, up.info),
            started=live.steps,
            # A step that writes a node's files again (a roll) keeps what it came up with.
            node_properties=self.node_properties(),
        )
        for family in FAMILIES:
            planned = self.plan.steps_of(family.key)
            if planned:
                driver = live.steps[family.key] = family.drive(planned, stage)
                self.say(f"{family.key}: {len(planned)} steps (see plan.json)")
                driver.start()

    def node_properties(self) -> dict[str, str]:
        """What every Kafka node's server.properties is given: the step families' and the
        workload's (the share group's lock), at bring-up and again by every roll."""
        return {
            **node_properties(self.plan.steps),
            **self.workload_kind.node_properties(self.plan.generator),
        }

    def _started_on(self, live: Live, info: ClusterInfo) -> KafkaDist:
        """The release the nodes started on, as assembled for the run."""
        started = [d for d in self.releases.values() if d.version == info.version]
        return started[0] if started else live.cluster.dist(info)

    def _read_back(self, live: Live, up: Up, workload: Workload, observer: Observer) -> None:
        """Everything healed and the cluster ready again, then the workload's final reads."""
        final_s = self.spec.final_timeout
        if isinstance(workload, SizedFinal):
            final_s = workload.final_timeout(final_s)
        self._note(phase="final reads", budget_s=FINAL_BUDGET_S + final_s)
        self.phases.mark("heal")
        self._heal(live)
        self.phases.mark("ready after heal")
        # A node a lasting fault keeps down (a file Kafka refuses to start on) is left down and
        # recorded; the final reads and the checks go on with the nodes that are up.
        lasting = lasting_of(self.nemeses, up.ctx)
        kept = self._wait_ready(live.cluster, up.info, "after healing", QUIESCE_TIMEOUT_S, lasting)
        if kept:
            record_kept_down(up.recorder, kept)
            self.summary["kept_down"] = sorted(kept)
        for family in FAMILIES:
            if family.key in live.steps:
                self.summary.update(family.after_heal(live.steps[family.key], self.spec.values()))
        self.say(self.workload_kind.FINAL_SAYS)
        self.phases.mark("final reads")
        self.summary[self.workload_kind.FINAL_KEY] = workload.final(
            self.processes.fresh, up.recorder.record, final_s
        )
        workload.close()
        self._observe_after_heal(up.info)
        observer.stop()
        self.summary["observer_samples"] = observer.samples

    def _wait_ready(
        self,
        dc: ClusterHandle,
        info: ClusterInfo,
        why: str,
        timeout: float,
        lasting: Lasting | None = None,
    ) -> dict[str, dict[str, Any]]:
        return wait_observed_ready(dc, info, why, timeout, self.say, lasting)

    # Ending, on every path -----------------------------------------------------------------------
    def _observe_after_heal(self, info: ClusterInfo) -> None:
        """With --liveness fail, the observer goes on until the after-heal bound has passed
        since the heal: brokers and controllers not back by then are judged (a run ending
        sooner gets a note, not a judgement: checkers/families/liveness/registration.py)."""
        if self.spec.liveness != "fail" or self._healed_at is None:
            return
        nodes = [{"roles": sorted(n.roles)} for n in info.topology.nodes]
        bound = Bounds.of({"timing": info.timing, "nodes": nodes}).after_heal_s
        left = self._healed_at + bound + AFTER_HEAL_MARGIN_S - time.monotonic()
        if left <= 0:
            return
        self.phases.mark("observed after heal")
        self.say(
            f"liveness: observing the cluster {left:.0f} s more, to {bound:g} s after the heal "
            "(--liveness fail judges brokers and controllers then)"
        )
        time.sleep(left)  # an observation window, not a wait for readiness

    def _stop_steps(self, live: Live) -> None:
        """No fault or planned step begins after this; each family says how far it got."""
        if live.faults is not None:
            live.faults.stop()
        # The last started first: it may be waiting for an earlier one to finish.
        for key, driver in reversed(live.steps.items()):
            if key not in self.summary:
                every, self.summary[key] = stop_and_report(driver, self.say)
                write_json(live.run_dir / f"{driver.process}.json", every)

    def _heal(self, live: Live) -> None:
        # Once the cluster exists a fault may be on it (even the clock's preparation restarts
        # nodes), so healing does not wait for the fault driver to have started.
        if live.healed is not None or live.up is None or not live.cluster.exists():
            return
        live.healed = heal(self.nemeses, live.up.ctx, live.up.recorder, live.cluster)
        self._healed_at = time.monotonic()
        self.summary["healed"] = live.healed
        self._note(healed=True)

    def _finish(self, live: Live, finished: bool) -> None:
        run_dir = live.run_dir
        self._note(phase="ending", budget_s=ENDING_BUDGET_S)
        self.stop.set()
        # No new fault once the run is ending: a step due while clients finish would be undone
        # by the heal anyway, and would only blur what the history shows.
        self._stop_steps(live)
        # Clients finish their in-flight operation (bounded by client timeouts) before healing.
        if live.clients is not None:
            live.clients.join(WORKER_JOIN_S)
        if live.observer is not None:
            live.observer.stop()
        self._heal(live)
        if live.workload is not None:
            live.workload.close()
        if live.client_nets is not None:
            # After the clients inside them are gone; a kept cluster keeps none of them. The
            # cluster's removal takes them too, so a failure here costs nothing recorded.
            try:
                live.client_nets.remove_client_nets()
            except Exception as exc:
                self.say(f"client networks not removed ({type(exc).__name__}: {exc})")
        if live.faults is not None:
            healed = live.healed or []
            write_json(
                run_dir / "nemesis.json", {"timeline": live.faults.timeline, "healed": healed}
            )
        if live.up is not None:
            self.phases.mark("history")
            self.summary["ops"] = keep_history(live.up.recorder, run_dir, self.say)
            self._note(history_kept=True)
        if live.up is not None or (live.made and live.cluster.exists()):
            keep = self.spec.keep_cluster
            self.phases.mark("collect and tear down")
            collect_and_tear_down(live.cluster, self.spec.cluster, keep, run_dir, self.say)
            self._note(torn_down=True)
        checked = finished and live.up is not None
        self.phases.mark("check and report")
        self.summary["check"] = check_run(run_dir, self.say) if checked else not_checked(run_dir)
        self._note(checked=True)

    def _note(self, **facts: Any) -> None:
        """Tells the supervisor where the run is (no-op in a run without one)."""
        self._facts.update(facts)
        # The supervisor's "final reads" budget spans the heal and the wait for readiness,
        # which the record tells apart (_read_back marks them).
        if facts.get("phase") not in (None, "final reads"):
            self.phases.mark(facts["phase"])
        if self.on_state is not None:
            self.on_state({**self._facts, "summary": self.summary})

    def _exit_code(self, interrupted: bool, error: BaseException | None) -> int:
        if interrupted:
            return INTERRUPTED_EXIT
        if isinstance(error, ClusterRemoved):
            return CLUSTER_REMOVED_EXIT
        if error is not None:
            return BAD_INPUT_EXIT
        if not (self.summary.get(self.workload_kind.FINAL_KEY) or {}).get("complete", False):
            return 1
        return int(self.summary.get("check", {}).get("exit_code", 0) or 0)

    # A cluster removed under the run -------------------------------------------------------------
    def _removal(self, live: Live, error: BaseException | None) -> BaseException | None:
        """``ClusterRemoved`` in place of ``error`` when the cluster was removed under the run
        (whatever that did to the step that noticed); ``error`` otherwise. Asked before the
        ending, whose teardown removes the cluster itself."""
        why = self._removed_why(live, error)
        if why is None:
            return error
        if live.up is not None:
            kept = f"what it recorded is kept in {live.run_dir}, not checked"
        else:
            kept = f"it recorded nothing; {live.run_dir}/run.json says so"
        removed = ClusterRemoved(self.spec.cluster, why, kept)
        removed.__cause__ = error
        self.summary["cluster_removed"] = {
            "why": why,
            "error": f"{type(error).__name__}: {error}" if error is not None else None,
            "history_kept": live.up is not None,
        }
        return removed

    def _removed_why(self, live: Live, error: BaseException | None) -> str | None:
        note = self.hold.removed_by() if self.hold is not None else None
        by = f"by pid {note['pid']}, {note['command']}, at {note['at']}" if note else None
        gone = live.cluster.missing(live.up.info) if live.up is not None else None
        if gone is None and live.up is None:
            gone = live.cluster.says_removed(error)
        if by is None and gone is None:
            return None
        return "; ".join(w for w in (by, gone, f"noticed {self._phase(live)}") if w)

    def _phase(self, live: Live) -> str:
        if live.up is None:
            return "while bringing it up"
        if live.clients is None:
            return "during setup"
        if not self.stop.is_set():
            return "during the workload"
        return "after the time limit (healing, final reads)"

    def _worker(self, workload: Workload, rec: Recorder, slot: int) -> None:
        """One client slot's loop (bench/bench_run.py drives it without a cluster run)."""
        spec = self.spec
        Clients(
            workload, rec, self.plan.seed, spec.concurrency, spec.rate, self.processes, self.stop
        ).run_slot(slot)


@contextmanager
def _second_interrupt_waits(say: Callable[[str], None]) -> Iterator[None]:
    """A second Ctrl-C must not leave faults in place or the cluster behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda *_: say("still cleaning up, please wait"))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
