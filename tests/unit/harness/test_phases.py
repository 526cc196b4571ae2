"""run.json's ``phases``: one entry per phase in order, each lasting until the next begins."""

from __future__ import annotations

from harness.run.phases import Phases


def test_phases_follow_each_other_and_repeats_are_one_phase():
    p = Phases()
    p.mark("bring-up")
    p.mark("workload")
    p.mark("workload")  # the supervisor's notes repeat a phase: still one
    p.mark("check and report")
    p.close()
    rec = p.record()
    assert [r["phase"] for r in rec] == ["bring-up", "workload", "check and report"]
    assert all(r["seconds"] >= 0 for r in rec)
    starts = [r["started_wall"] for r in rec]
    assert starts == sorted(starts)
    # Each phase ends where the next begins: the lengths add up to the first start to the close.
    assert abs(sum(r["seconds"] for r in rec[:-1]) - (starts[-1] - starts[0])) < 0.01


def test_no_phase_marked_is_an_empty_record():
    assert Phases().record() == []
