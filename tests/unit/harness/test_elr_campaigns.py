"""Issue 30's example nightly campaigns plan offline: the ELR version matrix (3.9 without ELR,
4.0 with it enabled by a feature step before the fault, 4.4 by default), pre-vote on 3.9 and
4.4 with five controllers, and an upgrade finalized both ways."""

from __future__ import annotations

from pathlib import Path

from harness.campaign.spec import load_campaign
from harness.plan import build_plan
from harness.spec import spec_from_dict

CAMPAIGNS = Path(__file__).resolve().parents[3] / "examples" / "campaigns"


def _cells(name: str):
    return load_campaign(CAMPAIGNS / name).cells


KILL, POWER_LOSS = "shutdown:elr-last-replica", "shutdown:elr-power-loss"


def test_the_elr_matrix_is_3_9_plain_4_0_with_the_feature_first_and_4_4_plain():
    cells = [c for c in _cells("elr-nightly.yaml") if c.options["nemesis"] == KILL]
    by_version = {c.options["version"]: c.options.get("features") for c in cells}
    assert set(by_version) == {"3.9", "4.0", "4.4"} and len(cells) == 3
    assert by_version["3.9"] is None and by_version["4.4"] is None
    assert not any(c.options.get("disk_layer") or c.options.get("elr") for c in cells)
    (cell,) = [c for c in cells if c.options["version"] == "4.0"]
    plan = build_plan(spec_from_dict(dict(cell.options), fresh=True), cell.seed)
    enable = plan.steps_of("upgrade")[0]
    first_fault = min(f.at_s for f in plan.faults if f.action == "start")
    # The feature is finalized before the last replica standing is made.
    assert enable.params["dry_run"] is False and enable.at_s < first_fault


def test_the_power_loss_cells_are_each_side_of_elr_on_the_layer():
    cells = [c for c in _cells("elr-nightly.yaml") if c.options["nemesis"] == POWER_LOSS]
    shapes = [(c.options["version"], c.options.get("elr"), c.options.get("flush_messages"))
              for c in cells]  # fmt: skip
    assert shapes == [
        ("3.9", None, None), ("3.9", None, 1), ("4.0", None, None), ("4.0", "on", None),
        ("4.4", None, None), ("4.4", "off", None),
    ]  # fmt: skip
    for cell in cells:
        spec = spec_from_dict(dict(cell.options), fresh=True)
        assert spec.disk_layer_mode == "journal" and spec.disk_writeback == 30
        assert spec.options.get("features") is None


def test_pre_vote_runs_five_controllers_on_both_sides_of_4_0_and_the_upgrade_both_ways():
    cells = _cells("prevote-nightly.yaml")
    assert sorted(c.options["version"] for c in cells) == ["3.9", "4.4"]
    assert {c.options["controllers"] for c in cells} == {5}
    finals = {c.options["finalize"] for c in _cells("release-version-nightly.yaml")}
    assert finals == {"features", "release-version"}
