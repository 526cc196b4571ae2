"""The run interpreter: carries out a plan against a fresh cluster and owns the history.

Order of a run: cluster up, workload setup, clients + observer + nemesis for the time limit, heal
everything, wait until the cluster is observed ready again, final reads, Parquet copy, collect
logs and metadata, check, cluster down. Healing and teardown happen on every path out (normal end,
error, Ctrl-C), and the history is kept whatever happened.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusters.docker_cluster import ClusterInfo, DockerCluster
from clusters.engine import client as docker_client
from clusters.topology import build_topology
from harness.exit_codes import BAD_INPUT_EXIT, INTERRUPTED_EXIT
from harness.faults import FaultDriver, heal
from harness.migration import MigrationDriver
from harness.plan import PLAN_NAME, Plan, client_rng
from harness.progress import RunProgress
from harness.recorder import Recorder
from harness.rundir import make_run_dir, point_latest, write_json
from history.columnar import write_parquet
from history.format import JSONL_NAME, NEMESIS, PARQUET_NAME
from history.reader import read_history
from nemesis.api import FaultContext
from nemesis.registry import build
from workloads.admin import AdminWorkload, final_views
from workloads.client import Completion, Invocation
from workloads.observe import Observer
from workloads.queue import QueueWorkload, final_reads

QUIESCE_TIMEOUT_S = 120.0
# Restarting every node at once (the clock's preparation) on two busy cores takes longer.
PREPARE_READY_TIMEOUT_S = 300.0
READY_REPORT_EVERY_S = 10.0
PREPARE_WHY = {"clock": "restarting each JVM under libfaketime at offset 0"}
# A worker finishing its last operation after the time limit is bounded by the client timeouts.
WORKER_JOIN_S = 40.0


class ProcessIds:
    """Jepsen's process ids: slot i starts as process i; a retired process p becomes p + n."""

    def __init__(self, concurrency: int) -> None:
        self.n = concurrency
        self._lock = threading.Lock()
        self.highest = concurrency - 1

    def retire(self, process: int) -> int:
        with self._lock:
            new = process + self.n
            self.highest = max(self.highest, new)
            return new

    def fresh(self) -> int:
        with self._lock:
            self.highest += 1
            return self.highest


@dataclass
class RunResult:
    run_dir: Path
    seed: int
    exit_code: int
    summary: dict[str, Any] = field(default_factory=dict)


class Run:
    def __init__(
        self,
        plan: Plan,
        say: Callable[[str], None] = print,
        show_progress: bool = True,
        replay_of: str | None = None,
        nemeses: dict[str, Any] | None = None,
    ) -> None:
        self.plan = plan
        self.spec = plan.run_spec()
        self.say = say
        self.show_progress = show_progress
        self.replay_of = replay_of
        self.stop = threading.Event()
        self.summary: dict[str, Any] = {"seed": plan.seed, "replay_of": replay_of}
        self.run_dir: Path | None = None
        # Given nemeses replace the registry's (tests drive the interpreter with their own).
        self._given_nemeses = nemeses

    # Setup -------------------------------------------------------------------------------------
    def prepare(self) -> Path:
        """The run directory with spec and plan, before anything touches a cluster."""
        if self._given_nemeses is not None:
            self.nemeses = self._given_nemeses
        else:
            # An unknown package fails here, before any Docker work.
            self.nemeses = build(self.spec.nemesis)
        run_dir = make_run_dir(self.spec.results_dir, self.spec.run_name, self.plan.seed)
        self.run_dir = run_dir
        write_json(run_dir / "spec.json", self.plan.spec)
        (run_dir / PLAN_NAME).write_text(self.plan.to_json())
        point_latest(self.spec.results_dir, run_dir)
        return run_dir

    def execute(self) -> RunResult:
        run_dir = self.run_dir or self.prepare()
        spec = self.spec
        self.say(f"seed {self.plan.seed}; run directory {run_dir}")
        dc = DockerCluster(docker_client(), spec.cluster)
        topo = build_topology(
            spec.topology, cluster=spec.cluster, subnet=spec.subnet, zookeepers=spec.zookeepers
        )
        interrupted = False
        error: BaseException | None = None
        recorder: Recorder | None = None
        info: ClusterInfo | None = None
        started = time.monotonic()
        try:
            self.say(f"bringing up {spec.topology} cluster '{spec.cluster}' (Kafka {spec.version})")
            info = dc.up(topo, spec.version, timing=spec.timing, say=self.say)
            self.summary["kafka_version"] = info.version
            run_id = f"{spec.run_name}/{run_dir.name}"
            kind = AdminWorkload if spec.workload == "admin" else QueueWorkload
            recorder = Recorder(run_dir / JSONL_NAME, run_id, header=kind.HISTORY_HEADER)
            self._drive(dc, info, recorder, run_id)
        except KeyboardInterrupt:
            interrupted = True
            self.say("interrupted: healing, collecting and keeping the history")
        except BaseException as exc:
            error = exc
        finally:
            previous = signal.getsignal(signal.SIGINT)
            in_main = threading.current_thread() is threading.main_thread()
            if in_main:
                # A second Ctrl-C must not leave faults in place or the cluster behind.
                signal.signal(signal.SIGINT, lambda *_: self.say("still cleaning up, please wait"))
            try:
                self._finish(dc, info, recorder, interrupted, error)
            finally:
                if in_main:
                    signal.signal(signal.SIGINT, previous)
        self.summary["seconds"] = round(time.monotonic() - started, 1)
        code = self._exit_code(interrupted, error)
        self.summary["exit_code"] = code
        write_json(run_dir / "run.json", self.summary)
        if error is not None:
            raise error
        return RunResult(run_dir, self.plan.seed, code, self.summary)

    # The run proper ------------------------------------------------------------------------------
    def _drive(self, dc: DockerCluster, info: ClusterInfo, rec: Recorder, run_id: str) -> None:
        spec = self.spec
        admin = spec.workload == "admin"
        kind = AdminWorkload if admin else QueueWorkload
        wl = kind(self.plan.generator, info.topology, self.plan.seed, run_id)
        self.workload = wl
        self.ctx = FaultContext(topology=info.topology, nodes=dc.nodes(info))
        self._prepare_nemeses(dc, info, rec)
        if admin:
            self.say("workload setup: every broker answers DescribeCluster")
        else:
            self.say(f"workload setup: topic {wl.topic} with {wl.keys} partitions")
        wl.setup()
        self.observer = Observer(info.topology, rec)
        self.driver = FaultDriver(self.plan.faults, self.nemeses, self.ctx, rec, wl.hints)
        self.processes = ProcessIds(spec.concurrency)
        workers = [
            threading.Thread(target=self._worker, args=(wl, rec, i), name=f"c{i}", daemon=True)
            for i in range(spec.concurrency)
        ]
        self.workers = workers
        self.migration = None
        if self.plan.migration:
            self.migration = MigrationDriver(
                self.plan.migration, info, dc.dist(info), dc.nodes(info), rec
            )
        self.observer.start()
        self.driver.start()
        if self.migration is not None:
            self.say(f"migration: {len(self.plan.migration)} steps (see plan.json)")
            self.migration.start()
        t0 = time.monotonic()
        for w in workers:
            w.start()
        progress = RunProgress(spec.time_limit, rec, self.driver, enabled=self.show_progress)
        with progress:
            while time.monotonic() - t0 < spec.time_limit:
                progress.update(time.monotonic() - t0)
                time.sleep(0.25)
            progress.update(spec.time_limit)
        self.stop.set()
        self.driver.stop()
        self._stop_migration()
        self.say("time limit reached: waiting for in-flight operations")
        for w in workers:
            w.join(WORKER_JOIN_S)
        self._heal(dc, rec)
        self._wait_ready(dc, info, "after healing", QUIESCE_TIMEOUT_S)
        if admin:
            self.say("final views: every broker describes the cluster and lists topics")
            outcome = final_views(wl, self.processes.fresh, rec.record, spec.final_timeout)
            self.summary["final_views"] = outcome
        else:
            self.say("final reads: every key from the beginning")
            outcome = final_reads(wl, self.processes.fresh, rec.record, spec.final_timeout)
            self.summary["final_reads"] = outcome
        wl.close()
        self.observer.stop()
        self.summary["observer_samples"] = self.observer.samples

    def _stop_migration(self) -> None:
        """Ends the migration where it is (a waiting step ends info); records how far it got."""
        migration = getattr(self, "migration", None)
        if migration is None or "migration" in self.summary:
            return
        migration.stop()
        summary = migration.summary()
        self.summary["migration"] = {k: summary[k] for k in ("completed", "last_ok", "ended")}
        if self.run_dir is not None:
            write_json(self.run_dir / "migration.json", summary)
        self.say(
            "migration: "
            + ("completed" if summary["completed"] else f"ended early: {summary['ended']}")
        )

    def _prepare_nemeses(self, dc: DockerCluster, info: ClusterInfo, rec: Recorder) -> None:
        """Runs each package's optional ``prepare`` before the workload, then waits for readiness.

        The clock package restarts every node under libfaketime here, so that its faults during
        the run only change offsets; that cost is paid before the clients start, and recorded.
        """
        restarted = False
        for name, nem in self.nemeses.items():
            prepare = getattr(nem, "prepare", None)
            if prepare is None:
                continue
            self.say(f"{name}: preparing the nodes ({PREPARE_WHY.get(name, 'package setup')})")
            rec.invoke("prepare", {"by": name}, NEMESIS)
            try:
                actions = prepare(self.ctx)
            except Exception as exc:
                rec.info("prepare", {"by": name}, NEMESIS, f"{type(exc).__name__}: {exc}")
                raise
            rec.ok("prepare", {"by": name, "actions": actions}, NEMESIS)
            for action in actions:
                self.say(f"{name}: {action}")
            restarted = restarted or bool(actions)
        if restarted:
            self._wait_ready(dc, info, "after preparing the nodes", PREPARE_READY_TIMEOUT_S)

    def _wait_ready(self, dc: DockerCluster, info: ClusterInfo, why: str, timeout: float) -> None:
        """Waits for observed readiness, saying what is still missing every few seconds."""
        from clusters.readiness import wait_ready

        self.say(f"waiting until the cluster is observed ready {why}")
        t0 = time.monotonic()
        said = [t0]

        def on_poll(status: dict[str, Any], problems: list[str]) -> None:
            now = time.monotonic()
            if problems and now - said[0] >= READY_REPORT_EVERY_S:
                said[0] = now
                self.say(f"  {now - t0:.0f} s, not yet: {'; '.join(problems[:3])}")

        wait_ready(dc, info, timeout=timeout, on_poll=on_poll)
        self.say(f"cluster ready {why} ({time.monotonic() - t0:.0f} s)")

    def _worker(self, wl: QueueWorkload | AdminWorkload, rec: Recorder, slot: int) -> None:
        spec = self.spec
        process = slot
        interval = spec.concurrency / spec.rate if spec.rate else 0.0
        # Slots start staggered so that the total rate is smooth, not bursts of `concurrency`.
        next_at = time.monotonic() + interval * slot / spec.concurrency
        while not self.stop.is_set():
            client = wl.client(process, client_rng(self.plan.seed, process))
            # A client with nothing to open (admin) goes straight to its operations.
            ok = client.setup_op is None or self._do(rec, client, client.setup_op, client.open)
            while ok and not self.stop.is_set():
                if interval:
                    if self.stop.wait(max(0.0, next_at - time.monotonic())):
                        break
                    next_at = max(next_at + interval, time.monotonic() - interval)
                ok = self._do(rec, client, client.next_op(), client.apply)
            client.close()
            if not ok:
                process = self.processes.retire(process)

    def _do(
        self,
        rec: Recorder,
        client: Any,
        op: Invocation,
        apply: Callable[[Invocation], Completion],
    ) -> bool:
        """One invocation and its completion; False when the process must retire."""
        rec.invoke(op.f, op.value, client.process, op.node)
        try:
            done = apply(op)
        except Exception as exc:  # a client bug: the op's fate is unknown
            done = Completion("info", op.value, f"{type(exc).__name__}: {exc}", op.node)
        rec.record(done.type, op.f, done.value, client.process, done.node or op.node, done.error)
        return done.type != "info" and not done.retire

    # Ending ----------------------------------------------------------------------------------
    def _heal(self, dc: DockerCluster, rec: Recorder | None) -> None:
        # Once the cluster exists a fault may be on it (even the clock's preparation restarts
        # nodes), so healing does not wait for the fault driver to have started.
        if getattr(self, "_healed", False) or rec is None or not dc.exists():
            return
        self._healed = True
        self.summary["healed"] = heal(self.nemeses, getattr(self, "ctx", None), rec, dc)

    def _finish(
        self,
        dc: DockerCluster,
        info: ClusterInfo | None,
        rec: Recorder | None,
        interrupted: bool,
        error: BaseException | None,
    ) -> None:
        assert self.run_dir is not None
        run_dir = self.run_dir
        self.stop.set()
        # No new fault once the run is ending: a step due while clients finish would be undone
        # by the heal anyway, and would only blur what the history shows.
        if getattr(self, "driver", None) is not None:
            self.driver.stop()
        self._stop_migration()
        # Clients finish their in-flight operation (bounded by client timeouts) before healing.
        for w in getattr(self, "workers", []):
            w.join(WORKER_JOIN_S)
        if getattr(self, "observer", None) is not None:
            self.observer.stop()
        self._heal(dc, rec)
        wl = getattr(self, "workload", None)
        if wl is not None:
            wl.close()
        if getattr(self, "driver", None) is not None:
            write_json(
                run_dir / "nemesis.json",
                {"timeline": self.driver.timeline, "healed": self.summary.get("healed", [])},
            )
        if rec is not None:
            self.summary["ops"] = dict(rec.counts)
            rec.close()
            try:
                history = read_history(run_dir / JSONL_NAME)
                write_parquet(history, run_dir / PARQUET_NAME)
            except Exception as exc:  # the JSONL is the record; Parquet can be rebuilt from it
                self.say(f"warning: no Parquet copy: {exc}")
        if info is not None or dc.exists():
            try:
                if self.spec.keep_cluster:
                    from clusters.collect import collect_cluster

                    collect_cluster(dc, run_dir, say=self.say)
                    self.say(f"cluster '{self.spec.cluster}' kept (--keep-cluster)")
                else:
                    dc.down(collect=run_dir, say=self.say)
            except Exception as exc:
                self.say(f"warning: collecting or tearing down failed: {exc}")
                if not self.spec.keep_cluster:
                    dc.remove()
        if rec is not None and not interrupted and error is None:
            self.summary["check"] = self._check(run_dir)
        else:
            not_checked = {"status": "not checked", "reason": "the run did not finish"}
            write_json(run_dir / "results.json", not_checked)
            self.summary["check"] = {"status": "not checked"}

    def _check(self, run_dir: Path) -> dict[str, Any]:
        # Imported here: the checkers pull in pyarrow and, for large histories, Spark.
        from checkers.api import check
        from checkers.verdict import CRASHED_EXIT

        try:
            verdict = check(run_dir)
        except Exception as exc:  # a checker bug must not cost the run its recorded history
            self.say(f"checker crashed: {type(exc).__name__}: {exc}; retry: kchaos check {run_dir}")
            return {"status": "checker crashed", "exit_code": CRASHED_EXIT}
        self.say(verdict.summary().rstrip())
        return {"status": verdict.status, "exit_code": verdict.exit_code}

    def _exit_code(self, interrupted: bool, error: BaseException | None) -> int:
        if interrupted:
            return INTERRUPTED_EXIT
        if error is not None:
            return BAD_INPUT_EXIT
        final = self.summary.get("final_views" if self.spec.workload == "admin" else "final_reads")
        if not (final or {}).get("complete", False):
            return 1
        check = self.summary.get("check", {})
        return int(check.get("exit_code", 0) or 0)
