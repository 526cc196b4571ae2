"""Worker slots whose producers record their own sends (harness/run/workers.py run_recorded) without
a JVM: a fake producer writes side-file records as KchaosRecorded.java does, the slots learn its
counts and highest process id, and keeping the history builds history.parquet from them. And
the `--send-recorder` option: what it writes into plan.json and the header, and what it
refuses."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.plan import build_plan
from harness.run.recorder import Recorder
from harness.run.workers import Clients, ProcessIds
from harness.run.wrapup import keep_history
from harness.spec import RunSpec, SpecError, validate
from history.format import JSONL_NAME, JVM_SENDS_DIR, JVM_SENDS_FIELD, PARQUET_NAME
from history.reader import read_history
from history.sidefiles import SENDS_TAG, TYPE_CODES, SideWriter, send_records
from workloads.pipelined import SlotSetup, history_header


class FakeRecorded:
    """Writes a send's invoke and completion records the way the JVM does, on its own thread;
    every 5th send ends info and retires its lane."""

    def __init__(self, slot: int, setup: SlotSetup) -> None:
        self.slot, self.setup = slot, setup
        self.lanes = [slot * setup.lanes + j for j in range(setup.lanes)]
        self.counts = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}
        self.highest = max(self.lanes)
        setup.side_dir.mkdir(parents=True, exist_ok=True)
        self._f = SideWriter(setup.side_dir / f"slot{slot}.ops", SENDS_TAG)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop)
        self._t.start()

    def _record(self, type_: str, p: int, key: int, n: int, error: str | None = None) -> None:
        r = send_records(1)
        r["time"] = time.monotonic_ns() - self.setup.t0_ns
        r["wall_us"] = time.time_ns() // 1000
        r["process"], r["producer"], r["key"], r["value"] = p, self.slot, key, n
        r["type"] = TYPE_CODES[type_]
        r["offset"] = n if type_ == "ok" else -1
        r["node"] = self._f.string("n1")
        r["error"] = self._f.string(error)
        self._f.write(r)

    def _loop(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            j = n % len(self.lanes)
            p, key = self.lanes[j], n % 3
            with self._lock:
                self._record("invoke", p, key, n)
                self.counts["invoke"] += 1
                if n % 5 == 0:
                    self._record("info", p, key, n, "retriable: TimeoutException")
                    self.counts["info"] += 1
                    self.lanes[j] = p + self.setup.concurrency * self.setup.lanes
                    self.highest = max(self.highest, self.lanes[j])
                else:
                    self._record("ok", p, key, n)
                    self.counts["ok"] += 1
            time.sleep(0.001)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {**self.counts, "highest": self.highest}

    def finish(self) -> dict[str, Any]:
        self._stop.set()
        self._t.join()
        self._f.close()
        return self.stats()


class FakeWorkload:
    def __init__(self) -> None:
        self.producers: list[FakeRecorded] = []

    def pipelined_lanes(self) -> int:
        return 3

    def producer_client(self, producer: int, rng: Any) -> Any:
        raise AssertionError("a slot whose producer records its own sends makes no other")

    def records_sends(self) -> bool:
        return True

    def recorded_producer(self, slot: int, setup: SlotSetup) -> FakeRecorded:
        p = FakeRecorded(slot, setup)
        self.producers.append(p)
        return p


def test_recorded_slots_count_reserve_their_processes_and_build_at_the_end(tmp_path: Path):
    header = history_header({"send_mode": "async", "in_flight": 3, "send_recorder": "jvm"})
    assert header["send_recorder"] == "jvm"
    rec = Recorder(tmp_path / JSONL_NAME, "t", header=header, flush_seconds=0.2)
    assert rec.side_dir == tmp_path / JVM_SENDS_DIR
    wl = FakeWorkload()
    ids = ProcessIds(2 * 3)
    stop = threading.Event()
    clients = Clients(wl, rec, 1, 2, 0.0, ids, stop)  # type: ignore[arg-type]
    rec.invoke("start-kill", None, "nemesis")
    clients.start()
    time.sleep(0.6)
    assert rec.counts["ok"] > 0  # learnt while the slots run, for the progress display
    rec.ok("start-kill", {}, "nemesis")
    stop.set()
    clients.join(10)
    final = [p.stats() for p in wl.producers]
    assert rec.counts["ok"] == sum(s["ok"] for s in final)
    assert rec.counts["info"] == sum(s["info"] for s in final)
    # The final reads' fresh processes come after every lane the slots retired.
    assert ids.fresh() == max(s["highest"] for s in final) + 1
    counts = keep_history(rec, tmp_path, lambda m: None)
    assert counts["ok"] == sum(s["ok"] for s in final)
    history = read_history(tmp_path)
    assert history.header[JVM_SENDS_FIELD]["files"] == ["slot0.ops", "slot1.ops"]
    assert not (tmp_path / JVM_SENDS_DIR).exists() and (tmp_path / PARQUET_NAME).exists()
    assert not (tmp_path / JSONL_NAME).exists()  # derived from the Parquet file on demand
    times = [op["time"] for op in history.ops]
    assert times == sorted(times)
    sends = [op for op in history.ops if op["f"] == "send"]
    assert len(sends) == 2 * sum(s["invoke"] for s in final)
    nemesis = [i for i, op in enumerate(history.ops) if op["process"] == "nemesis"]
    assert nemesis[0] < min(i for i, op in enumerate(history.ops) if op["f"] == "send")


def _spec(**kw: Any) -> RunSpec:
    base = {"version": "4.4", "send_mode": "async", "client": "java"}
    return validate(RunSpec.of(**{**base, **kw}))


def test_the_java_clients_pipelined_sends_are_recorded_in_its_jvm_unless_asked_otherwise():
    assert build_plan(_spec(), 1).generator["send_recorder"] == "jvm"
    assert "send_recorder" not in build_plan(_spec(send_recorder="harness"), 1).generator
    # Pipelined transactions and librdkafka keep the harness's recording, as before.
    assert "send_recorder" not in build_plan(_spec(txn=True), 1).generator
    assert "send_recorder" not in build_plan(_spec(client=None, version="3.9"), 1).generator
    assert "send_recorder" not in build_plan(_spec(client=None, send_mode=None), 1).generator


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"send_recorder": "jvm", "client": None}, "applies to --client java"),
        ({"send_recorder": "jvm", "send_mode": None}, "only applies with --send-mode async"),
        ({"send_recorder": "jvm", "txn": True}, "not transactions"),
        ({"send_recorder": "python"}, "unknown send recorder"),
    ],
)
def test_send_recorder_options_that_cannot_run_are_refused(kw, says):
    with pytest.raises(SpecError, match=says):
        _spec(**kw)


def test_a_history_is_copied_and_checked_whatever_the_machines_memory(tmp_path, monkeypatch):
    """The Parquet copy is written a chunk of lines at a time (history/stream.py), so no
    history is left unchecked for its size: there is no memory guard to trip."""
    import harness.run.wrapup as wrapup

    assert not hasattr(wrapup, "too_big_to_read")
    header = {"kchaos_history": 1, "started_wall": 1.0, "run": "t"}
    ops = [
        {"index": 0, "type": "invoke", "f": "send", "value": [["send", 1, 7]], "process": 0,
         "time": 1},
        {"index": 1, "type": "ok", "f": "send", "value": [["send", 1, [0, 7]]], "process": 0,
         "time": 2},
    ]  # fmt: skip
    (tmp_path / JSONL_NAME).write_text("".join(json.dumps(x) + "\n" for x in [header, *ops]))
    said: list[str] = []
    summary = wrapup._parquet_copy(tmp_path, said.append)
    assert summary is not None and summary.counts == {"ok": 1} and said == []
    got = wrapup.check_run(tmp_path, said.append)
    assert got["status"] != "not checked"
    assert json.loads((tmp_path / "results.json").read_text())["status"] == got["status"]


def _unbuilt_run(tmp_path: Path, legacy: bool = False) -> Path:
    """A run whose client host died before its ending: the recorder's history (its last line
    torn) and a slot's side file, never built (`legacy`: a JSONL side file, as kchaos wrote
    them before binary ones, never merged)."""
    header = {"kchaos_history": 1, "started_wall": 1.0, "run": "t", "send_mode": "async"}
    nemesis = {"index": 0, "type": "invoke", "f": "start-kill", "value": None,
               "process": "nemesis", "time": 5}  # fmt: skip
    (tmp_path / JSONL_NAME).write_text(
        json.dumps(header) + "\n" + json.dumps(nemesis) + "\n" + '{"index":1,"ty'
    )
    side = tmp_path / JVM_SENDS_DIR
    side.mkdir()
    if legacy:
        line = (
            '{"time":%d,"type":"%s","f":"send","value":%s,"process":0,"wall":1.0,"node":null,'
            '"producer":0}\n'
        )
        (side / "slot0.jsonl").write_text(
            line % (3, "invoke", '[["send",1,7]]') + line % (9, "ok", '[["send",1,[0,7]]]')
        )
        return tmp_path
    w = SideWriter(side / "slot0.ops", SENDS_TAG)
    r = send_records(2)
    r["time"], r["type"], r["offset"] = [3, 9], [0, 1], [-1, 0]
    r["wall_us"], r["key"], r["value"] = 1_000_000, 1, 7
    w.write(r)
    w.close()
    return tmp_path


def test_a_crashed_runs_recovery_builds_what_the_jvm_recorded(tmp_path: Path):
    from harness.run.wrapup import keep_history_file

    run = _unbuilt_run(tmp_path)
    said: list[str] = []
    assert keep_history_file(run, said.append) == {"ok": 1}
    assert any("2 JVM-recorded ops built into history.parquet" in s for s in said)
    history = read_history(run)
    assert [(o["time"], o["type"]) for o in history.ops] == [
        (3, "invoke"),
        (5, "invoke"),
        (9, "ok"),
    ]
    assert any("its last line was torn" in n for n in history.notes())


def test_a_crashed_run_recorded_before_binary_side_files_is_still_merged(tmp_path: Path):
    from harness.run.wrapup import keep_history_file

    run = _unbuilt_run(tmp_path, legacy=True)
    said: list[str] = []
    assert keep_history_file(run, said.append) == {"ok": 1}
    assert any("2 JVM-recorded send ops merged" in s for s in said)
    assert read_history(run).header[JVM_SENDS_FIELD]["files"] == ["slot0.jsonl"]


@pytest.mark.parametrize("named", ["dir", "jsonl"])
def test_kchaos_check_builds_a_run_it_finds_unbuilt(tmp_path: Path, named: str):
    from click.testing import CliRunner

    from harness.cli import main

    run = _unbuilt_run(tmp_path)
    arg = run if named == "dir" else run / JSONL_NAME
    got = CliRunner().invoke(main, ["check", str(arg)])
    assert not (run / JVM_SENDS_DIR).exists()
    assert read_history(run).header[JVM_SENDS_FIELD] == {
        "files": ["slot0.ops"],
        "history_torn": True,
    }
    results = json.loads((run / "results.json").read_text())
    assert results["status"] in ("valid", "unknown"), got.output
    # What the build dropped is said beside the verdict, from the Parquet file's summary.
    assert any("history.jsonl: its last line was torn" in n for n in results["notes"])
