"""The cluster hold (clusters/hold.py): seen by other processes, gone with its holder however it
ends, and never two holders of one cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clusters import hold
from clusters.errors import ClusterError
from clusters.hold import ClusterHeld, holding, take

ROOT = Path(__file__).parents[3]

# Takes the hold, says so on stdout, then waits for stdin to close (or for its death).
HOLDER = r"""
import sys
from clusters.hold import take
h = take(sys.argv[1], "kchaos run", "x")
h.note_run_dir("results/queue/20260101T000000-7")
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))


def _holder(cluster: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, cluster],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held", "the holder did not take the hold"
    return proc


def test_a_second_process_sees_the_first_ones_hold_and_who_it_is():
    proc = _holder("c1")
    try:
        with pytest.raises(ClusterHeld) as refused:
            take("c1", "kchaos cluster down", "remove it anyway")
    finally:
        proc.stdin.close()
        proc.wait(10)
    msg = str(refused.value)
    assert f"pid {proc.pid} (kchaos run, run directory results/queue/20260101T000000-7" in msg
    assert "since " in msg and msg.endswith("add --force to remove it anyway")
    assert refused.value.holder is not None and refused.value.holder.pid == proc.pid


def test_the_hold_ends_with_its_holder_and_leaves_no_file():
    proc = _holder("c1")
    proc.stdin.close()
    assert proc.wait(10) == 0
    with take("c1", "kchaos run", "x") as h:
        assert h.holder.pid == os.getpid()
    assert not hold.hold_path("c1").exists()


def test_sigkill_of_the_holder_leaves_no_stale_hold():
    proc = _holder("c1")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    # The killed holder could not remove its file: its stale content is replaced, not obeyed.
    assert hold.hold_path("c1").exists()
    with take("c1", "kchaos cluster down", "x") as h:
        assert h.holder.command == "kchaos cluster down"
        assert f'"pid": {os.getpid()}' in hold.hold_path("c1").read_text()


def test_holds_of_other_clusters_do_not_meet():
    with take("c1", "kchaos run", "x"), take("c2", "kchaos run", "x"), pytest.raises(ClusterHeld):
        take("c1", "kchaos run", "x")


def test_released_hold_can_be_taken_again_in_the_same_process():
    h = take("c1", "kchaos run", "x")
    h.release()
    h.release()  # twice is harmless: every exit path releases
    take("c1", "kchaos run", "x").release()


def test_many_takers_at_once_never_hold_together():
    holders: list[int] = []
    inside = threading.Lock()
    overlaps: list[int] = []

    def taker(i: int) -> None:
        for _ in range(30):
            try:
                h = take("c1", f"taker {i}", "x")
            except ClusterHeld:
                continue
            with h:
                if not inside.acquire(blocking=False):
                    overlaps.append(i)
                    continue
                holders.append(i)
                inside.release()

    threads = [threading.Thread(target=taker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [] and holders


def test_holding_refuses_unless_forced_and_tells_who_held():
    said: list[str] = []
    seen: list[object] = []
    with take("c1", "kchaos run", "x") as first:
        refused = pytest.raises(ClusterHeld, match="add --force to remove it anyway")
        with refused, holding("c1", "kchaos cluster down", False, "remove it anyway", said.append):
            pass
        with holding(
            "c1", "kchaos cluster down", True, "remove it anyway", said.append, seen.append
        ) as h:
            assert h is None
    assert seen == [first.holder]
    assert said and "going ahead (--force)" in said[0] and f"pid {os.getpid()}" in said[0]
    with holding("c1", "kchaos cluster down", False, "x", said.append) as h:
        assert h is not None


def test_a_forced_removal_leaves_a_note_for_its_holder_only():
    with take("c1", "kchaos run", "x") as h:
        assert h.removed_by() is None
        hold.note_forced_removal("c1", h.holder, "kchaos cluster down --force")
        note = h.removed_by()
        assert note is not None and note["command"] == "kchaos cluster down --force"
    # The holder's release clears its note; a later holder never reads an earlier one's.
    assert not (hold.hold_path("c1").parent / "c1.removed").exists()
    with take("c1", "kchaos run", "x") as h:
        other = hold.Holder(h.holder.pid + 1, "kchaos run", h.holder.since)
        hold.note_forced_removal("c1", other, "kchaos cluster down --force")
        assert h.removed_by() is None


def test_a_name_that_cannot_be_a_file_is_refused():
    with pytest.raises(ClusterError, match="not a cluster name"):
        take("../x", "kchaos run", "x")
