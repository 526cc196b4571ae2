"""`kchaos shrink` on a real failing run (issue 32's "done when"): Kafka 4.4.0 fails a check
every time one bit of a record batch's base offset is flipped on one replica, and the shrink
finds that fault among nine steps of other kinds.

The failure: a bit of a segment's first batch's base offset (byte 5, bit 6: offset 0 becomes
4,194,304) flipped on one node, whose JVM is then killed and started again. The base offset is
outside the batch's CRC, so Kafka's log recovery keeps the batch: the node's final log holds
the batch at 4,194,304 where the other in-sync replicas hold it at 0, and the durability check
finds `replica-missing-committed-records` (docs/disk.md, docs/shrink.md's worked example). The
wrap: seed 1's draw of kill, pause and partition over 40 s (a pause of one node, an isolated
active controller, a kill, a paused minority, random halves healed at the end: nine steps).

The shrink must end with the corrupt step alone, in a shorter run, and say its reproduction
rate. Each try is a `kchaos run --replay` process; with KCHAOS_LOCK set (the shared Docker lock
of a busy machine) the shrink and this test's own first run hold it per run, so run this test
without an outer flock: `KCHAOS_LOCK=/tmp/kchaos-docker.lock pytest -m slow THIS_FILE`.
At most 13 runs (12 and one to confirm) of a minute or more each, far more on a machine whose
Docker lock others share."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusters.docker_lifecycle import DockerCluster
from harness.plan import build_plan, load_plan
from harness.shrink.candidates import fault_units
from harness.spec import RunSpec, validate
from tests.integration.run_process import REPO

CLUSTER, SUBNET = "kchaos-shrink-real", "10.213.217.0/24"
SHORT_CLUSTER, SHORT_SUBNET = "kchaos-shrink-short", "10.213.218.0/24"
FAILING = "replica-missing-committed-records"
# One replica's copy of a batch's base offset, outside the CRC: 0 -> 4,194,304.
AIMED = {"file_class": "log", "how": "flip", "flip_byte": 5, "flip_bit": 6, "restart": 1}


def _wrapped_plan(folder: Path) -> None:
    spec = RunSpec.of(
        nemesis=["kill", "pause", "partition", "disk:corrupt@one"],
        time_limit=40.0,
        nemesis_interval=3.0,
        timing="fast",
        version="4.4",
        final_timeout=60.0,
    )
    plan = build_plan(validate(spec), 1)
    # The draw has two corrupt windows, of other classes: the first is aimed, the second gone.
    (first, *_) = [s.seed for s in plan.faults if s.kind == "corrupt"]
    plan.faults = [
        dataclasses.replace(s, params={**s.params, **AIMED}) if s.kind == "corrupt" else s
        for s in plan.faults
        if s.kind != "corrupt" or s.seed == first
    ]
    others = [s for s in plan.faults if s.kind != "corrupt"]
    assert len(others) >= 8 and len({(s.fault, s.kind) for s in others}) >= 4
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(plan.to_json())


def _kchaos(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _failing_run(
    plan: Path, results: Path, name: str, where: list[str], lock: str | None, timeout: float
) -> Path:
    """The run of the wrapped plan, which must fail with FAILING (not tolerated): its directory."""
    first = subprocess.run(
        [*(["flock", lock] if lock else []), sys.executable, "-m", "harness.cli", "run",
         "--replay", str(plan), "--name", name, "--results-dir", str(results), *where],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    (run_dir,) = (results / name).glob("*-1")
    found = json.loads((run_dir / "results.json").read_text())["findings"]
    assert FAILING in {f["kind"] for f in found if f.get("tolerated") is None}
    return run_dir


@pytest.mark.slow
@pytest.mark.timeout(3 * 3600)
def test_a_real_failure_is_shrunk_to_the_one_fault_that_causes_it(docker_client, tmp_path):
    lock = os.environ.get("KCHAOS_LOCK")
    locked = ["--lock", lock] if lock else []
    where = ["--cluster", CLUSTER, "--subnet", SUBNET]
    _wrapped_plan(tmp_path / "wrapped")
    results = tmp_path / "results"
    DockerCluster(docker_client, CLUSTER).remove()
    try:
        run_dir = _failing_run(tmp_path / "wrapped", results, "real", where, lock, 1200)
        shrunk = _kchaos(
            "shrink", str(run_dir), "--kind", FAILING, "--tries", "2", "--max-runs", "12",
            "--confirm", "1", "--no-progress", *where, *locked, timeout=3 * 3600 - 1500,
        )  # fmt: skip
        left = DockerCluster(docker_client, CLUSTER).containers()
    finally:
        DockerCluster(docker_client, CLUSTER).remove()
    assert shrunk.returncode == 0, shrunk.stdout[-3000:] + shrunk.stderr[-3000:]
    (directory,) = (results / "real").glob("shrink-*")
    record = json.loads((directory / "shrink.json").read_text())
    original = load_plan(run_dir / "plan.json")
    minimal = load_plan(directory / "plan.min.json")
    # Only the corruption is left, aimed as it was, in a shorter run.
    (unit,) = fault_units(minimal.faults)
    kept = {(minimal.faults[i].fault, minimal.faults[i].kind) for i in unit}
    assert kept == {("disk", "corrupt")}
    assert all(minimal.faults[i].params["flip_byte"] == 5 for i in unit)
    assert len(fault_units(original.faults)) >= 6
    assert minimal.spec["time_limit"] < original.spec["time_limit"]
    # The budget ends it (ddmin and the first passes fit in 12 runs) or the search does; the
    # runs counted are the original's tries, the candidates' and the one to confirm.
    assert record["status"] in ("done", "out of budget") and record["runs"] <= 12 + 1
    # The rates: the original's over --tries, the minimal plan's over --confirm (a rate, not a
    # verdict: each candidate on the path reproduced in a real run of its own).
    assert len(record["original"]["runs"]) == 2 and record["original"]["reproduced"]
    path = {c["id"]: c for c in record["candidates"] if c["id"] in record["path"]}
    assert path and all(c["reproduced"] for c in path.values())
    confirmed = record["confirmed"]
    assert confirmed["of"] == record["best"] and len(confirmed["runs"]) == 1
    assert "original reproduced in" in shrunk.stdout and "--confirm runs" in shrunk.stdout
    assert (directory / "shrink.html").is_file() and not left


def _short_plan(folder: Path) -> None:
    """The aimed flip and one kill of another node, in a 12 s run: the shortest real shrink."""
    spec = RunSpec.of(
        nemesis=["kill", "disk:corrupt@one"],
        time_limit=12.0,
        nemesis_interval=3.0,
        timing="fast",
        version="4.4",
        final_timeout=60.0,
    )
    plan = build_plan(validate(spec), 1)
    corrupt = [s for s in plan.faults if s.kind == "corrupt"][:2]
    corrupt = [dataclasses.replace(s, params={**s.params, **AIMED}) for s in corrupt]
    kills = [s for s in plan.faults if s.fault == "kill"][:2]
    plan.faults = sorted(corrupt + kills, key=lambda s: s.at_s)
    assert {(s.fault, s.kind) for s in plan.faults} >= {("disk", "corrupt")}
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(plan.to_json())


@pytest.mark.timeout(1800)
def test_a_short_real_failure_is_shrunk_to_its_fault(docker_client, tmp_path):
    """make test's real shrink: the aimed flip beside one kill of another node, the kill shrunk
    away."""
    lock = os.environ.get("KCHAOS_LOCK")
    locked = ["--lock", lock] if lock else []
    where = ["--cluster", SHORT_CLUSTER, "--subnet", SHORT_SUBNET]
    _short_plan(tmp_path / "wrapped")
    results = tmp_path / "results"
    DockerCluster(docker_client, SHORT_CLUSTER).remove()
    try:
        run_dir = _failing_run(tmp_path / "wrapped", results, "short", where, lock, 900)
        shrunk = _kchaos(
            "shrink", str(run_dir), "--kind", FAILING, "--tries", "1", "--max-runs", "4",
            "--confirm", "0", "--no-progress", *where, *locked, timeout=1500,
        )  # fmt: skip
        left = DockerCluster(docker_client, SHORT_CLUSTER).containers()
    finally:
        DockerCluster(docker_client, SHORT_CLUSTER).remove()
    assert shrunk.returncode == 0, shrunk.stdout[-3000:] + shrunk.stderr[-3000:]
    (directory,) = (results / "short").glob("shrink-*")
    record = json.loads((directory / "shrink.json").read_text())
    minimal = load_plan(directory / "plan.min.json")
    (unit,) = fault_units(minimal.faults)
    assert {(minimal.faults[i].fault, minimal.faults[i].kind) for i in unit} == {
        ("disk", "corrupt")
    }
    assert record["original"]["reproduced"] and record["runs"] <= 4
    path = {c["id"]: c for c in record["candidates"] if c["id"] in record["path"]}
    assert path and all(c["reproduced"] for c in path.values())
    assert not left
