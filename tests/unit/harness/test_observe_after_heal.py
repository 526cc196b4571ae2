"""With --liveness fail a run goes on observing after the heal until the after-heal bound has
passed (checkers/families/liveness/registration.py judges brokers and controllers only then);
without it, a run ends as soon as its final reads do."""

from __future__ import annotations

import pytest

from clusters.cluster import ClusterInfo
from clusters.topology import build_topology
from harness.plan import build_plan
from harness.run import interpreter
from harness.run.interpreter import Run
from harness.spec import spec_from_dict


@pytest.mark.parametrize(("liveness", "timing", "observed"), [
    ("fail", "fast", 35.0), ("fail", "default", 65.0), ("report", "fast", None)
])  # fmt: skip
def test_the_observer_goes_on_to_the_after_heal_bound_only_where_liveness_fails_the_run(
    monkeypatch, liveness, timing, observed
):
    slept: list[float] = []
    monkeypatch.setattr(interpreter.time, "sleep", slept.append)
    spec = spec_from_dict({"liveness": liveness, "timing": timing}, fresh=True)
    run = Run(build_plan(spec, 1), say=lambda m: None, show_progress=False, supervise=False)
    topo = build_topology("kraft-combined", cluster="heal")
    info = ClusterInfo(topology=topo, version="4.4.0", timing=timing, cluster_id="x")
    run._observe_after_heal(info)  # no heal yet: nothing to observe
    assert slept == []
    run._healed_at = 100.0
    monkeypatch.setattr(interpreter.time, "monotonic", lambda: 110.0)  # 10 s after the heal
    run._observe_after_heal(info)
    if observed is None:
        assert slept == []
    else:
        assert slept == [observed + interpreter.AFTER_HEAL_MARGIN_S - 10.0]
