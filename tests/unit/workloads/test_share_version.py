"""Share groups turned on by a feature step on Kafka 4.1 (docs/history.md, "The share
workload"): the storage is formatted without share.version when the run's own first
share.version step turns it on, the header says so, the warm-up is left out, and the plan
carries the steps (`--features`, steps/feature_steps.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.plan import build_plan
from harness.spec import RunSpec, validate
from workloads.share import ShareWorkload, share_version_steps, starts_off


def _gen(**options: Any) -> dict[str, Any]:
    spec = validate(RunSpec.of(workload="share", **{"version": "4.1.2", **options}))
    return build_plan(spec, 1).generator


@pytest.mark.parametrize(
    ("features", "levels"),
    [
        (None, []),
        ("share.version=1,share.version=0", [1, 0]),
        ("dry-run:share.version=1,transaction.version=2,share.version=0!unsafe", [0]),
        ("release-version=4.1, share.version=1", [1]),
    ],
)
def test_the_share_version_levels_the_steps_set(features, levels):
    assert share_version_steps(features) == levels


def test_a_first_step_that_turns_share_groups_on_formats_them_off():
    gen = _gen(features="share.version=1,share.version=0,share.version=1")
    assert gen["share_version"] == 0 and starts_off(gen)
    assert ShareWorkload.format_features(gen) == {}
    assert ShareWorkload.history_header(gen)["share"]["share_version"] == 0


@pytest.mark.parametrize(
    "features", [None, "share.version=0,share.version=1", "dry-run:share.version=1"]
)
def test_otherwise_41_is_formatted_with_share_groups_on(features):
    gen = _gen(features=features)
    assert gen["share_version"] == 1 and not starts_off(gen)
    assert ShareWorkload.format_features(gen) == {"share.version": 1}
    assert ShareWorkload.history_header(gen)["share"]["share_version"] == 1


def test_from_42_the_format_is_kafkas_own_whatever_the_steps():
    gen = _gen(version="4.3.1", features="share.version=0,share.version=1")
    assert "share_version" not in gen and ShareWorkload.format_features(gen) == {}
    assert "share_version" not in ShareWorkload.history_header(gen)["share"]


def test_the_plan_carries_the_steps_and_the_generator_the_format():
    got = CliRunner().invoke(
        main,
        [
            "run",
            "--workload",
            "share",
            "--version",
            "4.1.2",
            "--features",
            "share.version=1,share.version=0,share.version=1",
            "--time-limit",
            "60",
            "--plan-only",
            "--seed",
            "3105",
        ],
    )
    assert got.exit_code == 0, got.output
    plan = json.loads(got.output)
    assert plan["generator"]["share_version"] == 0
    steps = [(s["step"], s["params"]["feature"], s["params"]["level"]) for s in plan["upgrade"]]
    assert steps == [("features", "share.version", lv) for lv in (1, 0, 1)]
    times = [s["at_s"] for s in plan["upgrade"]]
    assert times == sorted(times) and times[0] >= 6 and times[-1] <= 48


def test_the_setup_line_says_share_groups_wait_for_the_step():
    wl = ShareWorkload.__new__(ShareWorkload)
    wl.topic, wl.keys, wl.group = "kchaos-share", 4, "g"
    wl.gen = _gen(features="share.version=1")
    assert "share groups off until a feature step finalizes share.version" in wl.setup_says()
    wl.gen = _gen()
    assert wl.setup_says().endswith("the share state warmed up")
