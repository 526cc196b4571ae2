"""Runs a campaign's cells one after another (or a few at once), each a `kchaos run` process.

A cell is its own `kchaos run --spec` process in its own session: whatever one run does (a
native crash, a hang, a cluster that never comes up) is that cell's outcome, and the campaign
goes on. Each cell's wall time is bounded: past ``cell_timeout`` the run is asked to stop
(SIGTERM: it heals, collects and keeps its history), then killed, and its cluster is removed.
Ctrl-C stops the campaign the same way after telling the running cells; ``--resume`` finishes
what is left. The record is written again after every cell (harness/campaign/report.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clusters.errors import ClusterError
from clusters.hold import ClusterHeld, check_name, name_problem, take
from clusters.topology import slot_subnets
from harness.campaign.report import (
    CRASHED,
    ERROR,
    FAILING,
    FINAL,
    INTERRUPTED,
    INVALID,
    PENDING,
    RUNNING,
    TIMEOUT,
    UNKNOWN,
    VALID,
    write_all,
)
from harness.campaign.spec import Campaign, Cell
from harness.exit_codes import CRASHED_RUN_EXIT, INTERRUPTED_EXIT
from harness.signals import handling
from harness.spec import SpecError
from history import strict_json

Say = Callable[[str], None]
RECORD = "campaign.json"
# The Docker clusters this campaign's cells ran on, one name a line: the only ones it removes.
MADE = "clusters-made.txt"
# After SIGTERM a run heals, collects and checks; past this it is killed.
STOP_GRACE_S = 180.0
STATUS_OF_EXIT = {0: VALID, 1: INVALID, 2: UNKNOWN, CRASHED_RUN_EXIT: CRASHED}
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Slot:
    """Where one cell at a time runs: its own cluster name and subnet."""

    cluster: str
    subnet: str


def slots(campaign: Campaign, parallel: int) -> list[Slot]:
    if campaign.hosts is not None and parallel != 1:
        raise SpecError(
            f"--parallel {parallel}: the cells of a campaign on SSH hosts share the one cluster "
            f"of {campaign.hosts}, so they run one at a time"
        )
    if parallel == 1:
        return [Slot(campaign.cluster, campaign.subnet)]
    for i in (0, parallel - 1):
        check_name(f"{campaign.cluster}-{i}", f"cluster (slot {i} of --parallel {parallel})")
    try:
        subnets = slot_subnets(campaign.subnet, parallel)
    except ClusterError as exc:
        raise SpecError(f"--parallel {parallel}: {exc}") from None
    return [Slot(f"{campaign.cluster}-{i}", subnet) for i, subnet in enumerate(subnets)]


def new_record(campaign: Campaign, spec_file: str) -> dict[str, Any]:
    return {
        "campaign": campaign.name,
        "spec_file": spec_file,
        "spec": campaign.raw,
        "started": _now(),
        "finished": None,
        "cell_timeout_s": campaign.cell_timeout,
        "cells": [
            {
                "id": c.id,
                "scenario": c.scenario,
                "axes": c.label,
                "seed": c.seed,
                "options": c.options,
                "status": PENDING,
            }
            for c in campaign.cells
        ],
    }


def read_record(directory: Path, flag: str) -> dict[str, Any]:
    """An earlier campaign's record (campaign.json), for ``flag``: a mapping whose cells each
    have an id and a status, or one SpecError sentence saying what it is not."""
    try:
        record = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{flag} {directory}: no readable {RECORD} ({exc})") from None
    cells = record.get("cells") if isinstance(record, dict) else None
    if not isinstance(cells, list) or not all(
        isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("status"), str)
        for c in cells
    ):
        raise SpecError(
            f"{flag} {directory}: {RECORD} is not a campaign record (a mapping whose cells each "
            "have an id and a status)"
        )
    return record


def resumed_record(campaign: Campaign, directory: Path) -> dict[str, Any]:
    """An earlier campaign's record, to finish: its cells must be this spec's cells."""
    record = read_record(directory, "--resume")
    if [c["id"] for c in record["cells"]] != [c.id for c in campaign.cells]:
        raise SpecError(
            f"--resume {directory}: its cells are not this spec's cells (was the spec changed?)"
        )
    for cell in record["cells"]:
        if cell["status"] not in FINAL:
            cell["status"] = PENDING
    record["finished"] = None
    return record


class Runner:
    def __init__(
        self,
        campaign: Campaign,
        directory: Path,
        record: dict[str, Any],
        parallel: int = 1,
        deflake: int = 0,
        say: Say = print,
        shrink_runs: int = 0,
        on_cell: Callable[[dict[str, Any]], None] | None = None,
        command: list[str] | None = None,
        cli: list[str] | None = None,
    ) -> None:
        self.campaign = campaign
        self.directory = directory
        self.record = record
        self.slots = slots(campaign, parallel)
        self.deflake = deflake
        # Runs each invalid cell's `kchaos shrink` may make once every cell has run (0: none).
        self.shrink_runs = shrink_runs
        self.say = say
        self.on_cell = on_cell
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen] = {}
        self.cells = {c.id: c for c in campaign.cells}
        # `kchaos`, and what runs one cell, given `--spec FILE`: `kchaos run` (tests give
        # stand-ins).
        self.cli = cli or [sys.executable, "-m", "harness.cli"]
        self.command = command or [*self.cli, "run"]

    # The campaign ----------------------------------------------------------------------------
    def run(self) -> int:
        # Before any cell: a cluster of a slot's name that this campaign did not make is
        # refused now, not after the cells before it have run.
        check_clusters(self.campaign, len(self.slots), self.directory)
        self._write()
        todo = [c for c in self.record["cells"] if c["status"] not in FINAL]
        free = list(self.slots)
        running: dict[Future, tuple[dict[str, Any], Slot]] = {}
        with ThreadPoolExecutor(max_workers=len(self.slots)) as pool, self._interruptible():
            while (todo or running) and not (self.stopping.is_set() and not running):
                while todo and free and not self.stopping.is_set():
                    cell, slot = todo.pop(0), free.pop(0)
                    running[pool.submit(self._cell, cell, slot)] = (cell, slot)
                done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    cell, slot = running.pop(future)
                    free.append(slot)
                    future.result()
            if self.shrink_runs:
                self._shrink_failures()
        if not self.stopping.is_set():
            self.record["finished"] = _now()
        self._write()
        if self.stopping.is_set():
            return INTERRUPTED_EXIT
        return self.record["exit_code"]

    def _cell(self, cell: dict[str, Any], slot: Slot) -> None:
        outcome = self._attempt(self.cells[cell["id"]], slot, cell)
        attempts = [outcome]
        # Deflaking: a failing cell again with its own seed, to say how often it reproduces.
        while (
            outcome["status"] in FAILING
            and len(attempts) <= self.deflake
            and not self.stopping.is_set()
        ):
            attempts.append(self._attempt(self.cells[cell["id"]], slot, cell))
        if len(attempts) > 1:
            failed = [a for a in attempts if a["status"] in FAILING]
            cell["attempts"] = attempts
            cell["reproduced"] = f"{len(failed)}/{len(attempts)}"
            cell["flaky"] = len(failed) < len(attempts)
            # The cell keeps its first failure: a finding seen once is reported, not hidden.
            first = failed[0]
            outcome = {**first, "seconds": sum(a.get("seconds") or 0 for a in attempts)}
        with self._lock:
            cell.update({k: v for k, v in outcome.items() if k != "attempt"})
            self._write()
        if self.on_cell is not None:
            self.on_cell(cell)

    def _attempt(self, cell: Cell, slot: Slot, entry: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            entry["status"] = RUNNING
            self._write()
        self._wait_for_cluster(slot)
        base = self.directory / "runs" / cell.id
        base.mkdir(parents=True, exist_ok=True)
        n = len([p for p in base.glob("attempt-*.json")]) + 1
        spec_path = base / f"attempt-{n}.json"
        spec_path.write_text(
            strict_json.dumps(
                cell.run_spec(self.directory / "runs", slot.cluster, slot.subnet), indent=1
            )
        )
        before = set(_run_dirs(base))
        started = time.monotonic()
        # From here the slot's cluster, if one exists later, is this cell's: it starts on none
        # (_wait_for_cluster), and `kchaos run` refuses a cluster it did not make.
        self._note_made(slot)
        self.say(f"cell {cell.id}: {cell.scenario}, seed {cell.seed} (attempt {n})")
        why = None
        with open(base / f"attempt-{n}.log", "wb") as log:
            proc = subprocess.Popen(
                [*self.command, "--spec", str(spec_path)],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            with self._lock:
                self._procs[cell.id] = proc
            try:
                code: int | None = proc.wait(timeout=self.campaign.cell_timeout)
            except subprocess.TimeoutExpired:
                why = f"over its {self.campaign.cell_timeout:.0f} s bound: stopped"
                code = _stop(proc)
                self._remove_cluster(slot)
            finally:
                with self._lock:
                    self._procs.pop(cell.id, None)
        seconds = time.monotonic() - started
        run_dirs = [d for d in _run_dirs(base) if d not in before]
        run_dir = run_dirs[-1] if run_dirs else None
        outcome = _outcome(code, run_dir, why)
        if self.stopping.is_set() and code == INTERRUPTED_EXIT:
            outcome["status"] = INTERRUPTED
        limit = float(cell.options.get("time_limit", 30.0))
        outcome.update(
            {
                "attempt": n,
                "exit_code": code,
                "seconds": round(seconds, 1),
                "overhead_s": round(seconds - limit, 1),
                "log": str((base / f"attempt-{n}.log").relative_to(self.directory)),
            }
        )
        if run_dir is not None:
            outcome["run_dir"] = str(run_dir.relative_to(self.directory))
            if (run_dir / "report.html").is_file():
                outcome["report"] = str((run_dir / "report.html").relative_to(self.directory))
        return outcome

    # Shrinking the failures ------------------------------------------------------------------
    def _shrink_failures(self) -> None:
        """`kchaos shrink` of each invalid cell's run, one at a time on the first slot's
        cluster, each its own process (as a cell is) bounded by ``shrink_runs`` runs; the
        cell's record links its shrink.html. A resumed campaign skips the cells shrunk."""
        slot = self.slots[0]
        for cell in self.record["cells"]:
            if self.stopping.is_set():
                return
            if cell["status"] != INVALID or not cell.get("run_dir") or cell.get("shrink"):
                continue
            run_dir = self.directory / cell["run_dir"]
            self._wait_for_cluster(slot)
            self._note_made(slot)
            self.say(f"cell {cell['id']}: shrinking {cell['run_dir']}")
            before = set(run_dir.parent.glob("shrink-*"))
            command = [
                *self.cli, "shrink", str(run_dir), "--no-progress",
                "--max-runs", str(self.shrink_runs),
                "--cluster", slot.cluster, "--subnet", slot.subnet,
            ]  # fmt: skip
            with open(run_dir.parent / "shrink.log", "ab") as log:
                proc = subprocess.Popen(
                    command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
                with self._lock:
                    self._procs[f"shrink {cell['id']}"] = proc
                try:
                    code = proc.wait()
                finally:
                    with self._lock:
                        self._procs.pop(f"shrink {cell['id']}", None)
            made = sorted(set(run_dir.parent.glob("shrink-*")) - before)
            shrunk = _json(made[-1] / "shrink.json") if made else {}
            with self._lock:
                cell["shrink"] = {
                    "exit_code": code,
                    "status": shrunk.get("status", "error"),
                    "runs": shrunk.get("runs", 0),
                    "best": shrunk.get("best"),
                }
                if made:
                    cell["shrink"]["html"] = str(
                        (made[-1] / "shrink.html").relative_to(self.directory)
                    )
                    best = next(
                        (c for c in shrunk.get("candidates", []) if c["id"] == shrunk.get("best")),
                        None,
                    )
                    if best is not None:
                        cell["shrink"]["size"] = best.get("size")
                self._write()

    # Clusters between cells -------------------------------------------------------------------
    def _wait_for_cluster(self, slot: Slot) -> None:
        """A run left over from a killed campaign may still hold the slot's cluster: it ends
        by itself (its time limit), so wait for it; a cluster nobody holds is removed."""
        deadline = time.monotonic() + self.campaign.cell_timeout
        said = False
        while True:
            try:
                with take(slot.cluster, "kchaos campaign", "run the cell anyway"):
                    self._remove_cluster(slot)
                    return
            except ClusterHeld as exc:
                if time.monotonic() > deadline or self.stopping.is_set():
                    raise SpecError(str(exc)) from None
                if not said:
                    self.say(f"waiting for cluster '{slot.cluster}': {exc}")
                    said = True
                time.sleep(2.0)

    def _remove_cluster(self, slot: Slot) -> None:
        """Removes the slot's cluster, left by a cell of this campaign (a killed one, or one of
        a killed campaign being resumed); a cluster of that name the campaign did not make is
        refused (CampaignError), never removed."""
        if self.campaign.hosts is not None:
            self._take_down_hosts()
            return
        cluster = self._existing(slot)
        if cluster is None:
            return
        self._refuse_if_not_ours(slot, cluster)
        self.say(f"removing cluster '{slot.cluster}' left by an earlier run of this campaign")
        with contextlib.suppress(Exception):
            cluster.remove()

    def _existing(self, slot: Slot) -> Any:
        return _existing(slot.cluster)

    def _refuse_if_not_ours(self, slot: Slot, cluster: Any = None) -> None:
        if self.campaign.hosts is not None or slot.cluster in self._made():
            return
        if cluster is not None or _existing(slot.cluster) is not None:
            raise SpecError(_not_ours(slot.cluster))

    def _made(self) -> set[str]:
        return made_clusters(self.directory)

    def _note_made(self, slot: Slot) -> None:
        if self.campaign.hosts is None and slot.cluster not in self._made():
            with self._lock, open(self.directory / MADE, "a", encoding="utf-8") as f:
                f.write(slot.cluster + "\n")

    def _take_down_hosts(self) -> None:
        """`kchaos cluster down --hosts`: heals what a killed cell left on the hosts and stops
        its JVMs (a no-op on hosts with nothing of the cluster). Its output goes to the
        campaign's own log, which a cell's failure to come up then explains."""
        command = [*self.cli, "cluster", "down", "--hosts", str(self.campaign.hosts)]
        with open(self.directory / "hosts-down.log", "ab") as log:
            try:
                code = subprocess.run(
                    command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                    timeout=STOP_GRACE_S, check=False,
                ).returncode  # fmt: skip
            except subprocess.TimeoutExpired:
                code = None
        if code != 0:
            self.say(
                f"could not take cluster '{self.campaign.cluster}' down on its hosts "
                f"(exit {code}): see {self.directory / 'hosts-down.log'}"
            )

    # Ctrl-C and SIGTERM ------------------------------------------------------------------------
    def _interruptible(self):
        """The first Ctrl-C (or SIGTERM) stops the running cells the way Ctrl-C stops a run,
        and no new cell starts; the record says which cells are left for --resume."""

        def stop(signum: int, _frame: Any) -> None:
            if not self.stopping.is_set():
                self.say("stopping: the running cells heal and end; --resume finishes the rest")
            self.stopping.set()
            with self._lock:
                procs = list(self._procs.values())
            for proc in procs:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)

        return handling(stop)

    def _write(self) -> None:
        write_all(self.directory, self.record)


def _stop(proc: subprocess.Popen) -> int | None:
    """SIGTERM (the run ends as on Ctrl-C), then SIGKILL of its whole session."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def _run_dirs(base: Path) -> list[Path]:
    """The run directories under a cell's results folder, oldest first (named by UTC time)."""
    return sorted(p.parent for p in base.glob("*/run.json"))


def _outcome(code: int | None, run_dir: Path | None, why: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if why is not None:
        out["status"] = TIMEOUT
        out["why"] = why
    else:
        out["status"] = STATUS_OF_EXIT.get(code, ERROR)
        if out["status"] == ERROR:
            out["why"] = f"kchaos run exited {code}: see its log"
    if run_dir is None:
        return out
    results = _json(run_dir / "results.json")
    run = _json(run_dir / "run.json")
    if run.get("crashed"):
        crashed = run["crashed"]
        how = crashed.get("signal") or f"exit {crashed.get('exit')}"
        out["why"] = f"client host {how} during {crashed.get('where')}"
    findings = [
        f
        for f in results.get("findings", [])
        if f.get("tolerated") is None and not f.get("unknown")
    ]
    kinds = sorted({f["kind"] for f in findings})
    out["findings"] = kinds
    out["summaries"] = [f"[{f['kind']}] {f.get('explanation', '')}" for f in findings[:10]]
    if out["status"] == UNKNOWN and not findings:
        unknown = sorted({f["kind"] for f in results.get("findings", []) if f.get("unknown")})
        out["why"] = "unknown: " + (", ".join(unknown) or results.get("status", "not checked"))
    out["kafka_version"] = run.get("kafka_version")
    # The liveness verdict, a result class of its own (docs/checkers.md, Liveness): its status
    # and its findings' one-line summaries, failing or only reported.
    liveness = results.get("liveness")
    if isinstance(liveness, dict):
        out["liveness"] = liveness.get("status")
        out["liveness_fails_run"] = bool(liveness.get("fails_run"))
        kinds = set(liveness.get("counts") or {})
        out["liveness_kinds"] = sorted(kinds)
        out["liveness_summaries"] = [
            f"[{f['kind']}] {f.get('explanation', '')}"
            for f in results.get("findings", [])
            if f.get("kind") in kinds
        ][:10]
    coverage = results.get("coverage")
    if isinstance(coverage, dict) and isinstance(coverage.get("states"), dict):
        out["coverage"] = coverage["states"]
        if coverage.get("missing"):
            out["not_exercised"] = list(coverage["missing"])
    return out


def _existing(cluster: str) -> Any:
    """The Docker cluster of that name when it exists; None when it does not or the engine
    does not answer (a cell then says so itself)."""
    from clusters.handles import open_cluster

    try:
        handle = open_cluster(cluster)
        return handle if handle.exists() else None
    except Exception:
        return None


def _not_ours(cluster: str) -> str:
    return (
        f"cluster '{cluster}' exists and this campaign did not make it, so it is left alone: "
        f"remove it with 'kchaos cluster down --name {cluster}', or give the campaign another "
        "cluster name (cluster: OTHER in its spec)"
    )


def made_clusters(directory: Path | None) -> set[str]:
    """The clusters a campaign's cells may have made (its directory's MADE file): a resumed
    campaign removes what its killed cells left, and nothing else."""
    if directory is None:
        return set()
    try:
        return set((directory / MADE).read_text(encoding="utf-8").split())
    except OSError:
        return set()


def check_clusters(campaign: Campaign, parallel: int, directory: Path | None = None) -> None:
    """Refuses (SpecError, one sentence) a campaign whose slots' Docker clusters exist and were
    not made by it (``directory``: the campaign being resumed): before its folder is made."""
    if campaign.hosts is not None:
        return
    made = made_clusters(directory)
    for slot in slots(campaign, parallel):
        if slot.cluster not in made and _existing(slot.cluster) is not None:
            raise SpecError(_not_ours(slot.cluster))


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _named_folder(results: Path, name: str) -> Path:
    """results/<name>, a campaign's folder: a name that is a path never reaches the disk."""
    problem = name_problem(name)  # refuses '/', '..' and '.': a name is one folder's
    if problem:
        raise SpecError(f"campaign name '{name}' is not a name: {problem}")
    return results / name


def campaign_dir(results: Path, name: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    d = _named_folder(results, name) / stamp
    d.mkdir(parents=True, exist_ok=False)
    return d


def keep_last(results: Path, name: str, n: int, say: Say) -> list[Path]:
    """Retention: only the newest ``n`` campaigns of this name stay."""
    olds = sorted(p for p in _named_folder(results, name).iterdir() if (p / RECORD).is_file())[:-n]
    for old in olds:
        shutil.rmtree(old, ignore_errors=True)
        say(f"removed {old} (--keep-last {n})")
    return olds


def failed_cells(directory: Path) -> list[str]:
    """The ids of an earlier campaign's cells that did not end valid."""
    record = read_record(directory, "--rerun-failed")
    return [c["id"] for c in record["cells"] if c["status"] != VALID]
