"""Issue 29's choreography nightly plans offline: each last-replica-standing sequence alone and
both rotated with pause, partition and power loss, on 3.9 (with a writeback) and 4.4, every
cell on the disk layer with its sequences healed within their windows."""

from __future__ import annotations

from pathlib import Path

from harness.campaign.spec import load_campaign
from harness.plan import build_plan, fault_windows
from harness.spec import spec_from_dict

CAMPAIGN = Path(__file__).resolve().parents[3] / "examples" / "campaigns" / "choreo-nightly.yaml"


def test_each_cell_runs_its_sequences_on_the_disk_layer_and_ends_them_healed():
    cells = load_campaign(CAMPAIGN).cells
    assert len(cells) == 6
    for cell in cells:
        spec = spec_from_dict(dict(cell.options), fresh=True)
        assert spec.disk_layer_mode == "journal"
        assert (spec.disk_writeback == 30) is (spec.version == "3.9")
        plan = build_plan(spec, cell.seed)
        windows = fault_windows(spec)
        named = [s for s in plan.faults if s.target == "nodes"]
        assert named, cell.id
        # Every fault the plan starts it stops, before the time limit.
        starts = sum(s.action == "start" for s in plan.faults)
        assert starts == sum(s.action == "stop" for s in plan.faults)
        assert max(s.at_s for s in plan.faults) < spec.time_limit
        if len(spec.nemesis) > 1:
            # The rotation: eight windows, each of the five items at least once.
            assert len(windows) == 8 and not plan.notes
            assert {s.fault for s in plan.faults} == {"pause", "partition", "disk"}
