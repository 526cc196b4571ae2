"""Same seed and options, same plan.json bytes: plans stored before a refactor are rebuilt after it.

The files in data/plans/ were written from the code as it was before the fault menus moved into
the nemesis packages and the workloads into a registry; a plan that differs by one byte means
that some random draw moved, and every stored run's replay would change with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.plan import build_plan
from harness.spec import RunSpec, validate

DATA = Path(__file__).parent / "data" / "plans"

PACKAGES = ("partition", "kill", "pause", "clock", "packet")
TOPOLOGIES = ("kraft-combined", "kraft", "zk", "migration")
# Long runs with short intervals: many draws per plan, so a moved draw cannot hide.
BUSY: dict[str, Any] = {"time_limit": 200.0, "nemesis_interval": 5.0}


def _cases() -> dict[str, tuple[dict[str, Any], int]]:
    cases: dict[str, tuple[dict[str, Any], int]] = {
        "queue-default-s1": ({}, 1),
        "queue-default-s42": ({}, 42),
        "queue-txn-s3": ({"txn": True}, 3),
        "queue-subscribe-s4": ({"mode": "subscribe"}, 4),
        "queue-txn-subscribe-all-s5": (
            {"txn": True, "mode": "subscribe", "nemesis": list(PACKAGES), **BUSY},
            5,
        ),
        "queue-keys-rate-s6": ({"keys": 3, "rate": 0.0, "concurrency": 7}, 6),
        "admin-s1": ({"workload": "admin"}, 1),
        "admin-kill-partition-s9": (
            {"workload": "admin", "nemesis": ["kill", "partition"], **BUSY},
            9,
        ),
        "admin-zk-all-s10": (
            {"workload": "admin", "topology": "zk", "zookeepers": 3, "nemesis": list(PACKAGES)},
            10,
        ),
        # Intervals that do not add up to round numbers: the rounding of step times shows.
        "clock-short-interval-s11": (
            {"nemesis": ["clock"], "time_limit": 30.0, "nemesis_interval": 0.3},
            11,
        ),
        "packet-odd-interval-s12": (
            {"nemesis": ["packet", "clock"], "time_limit": 100.0, "nemesis_interval": 3.3333},
            12,
        ),
        "migration-zk3-s13": ({"topology": "migration", "zookeepers": 3, "time_limit": 300.0}, 13),
        # The share workload (issue 31): its generator, on 4.4 and on 4.1 (formatted with
        # share.version, no renew), and its options as asked.
        "share-default-s1": ({"workload": "share", "version": "4.4"}, 1),
        "share-41-s2": ({"workload": "share", "version": "4.1"}, 2),
        "share-options-kill-s9": (
            {
                "workload": "share",
                "version": "4.4",
                "concurrency": 6,
                "share_consumers": 3,
                "share_ack_mode": "explicit",
                "share_acks": "accept=5,release=2,renew=1,none=1",
                "share_lock_ms": 1500,
                "share_delivery_limit": 3,
                "share_partitions": 6,
                "nemesis": ["kill"],
                **BUSY,
            },
            9,
        ),
    }
    for topology in TOPOLOGIES:
        cases[f"{topology}-none-s2"] = ({"topology": topology}, 2)
        for package in PACKAGES:
            cases[f"{topology}-{package}-s7"] = (
                {"topology": topology, "nemesis": [package], **BUSY},
                7,
            )
        for seed in (8, 99, 2**40 + 3):
            cases[f"{topology}-all-s{seed}"] = (
                {"topology": topology, "nemesis": list(PACKAGES), **BUSY},
                seed,
            )
    # Choreographies (nemesis/choreo.py): other packages' steps on seeded roles.
    cases["choreo-pause-s23"] = ({"nemesis": ["choreo:last-replica-pause"], **BUSY}, 23)
    cases["choreo-partition-kraft-s24"] = (
        {"topology": "kraft", "nemesis": ["choreo:last-replica-partition"], **BUSY},
        24,
    )
    cases["choreo-five-mixed-s25"] = (
        {"controllers": 5, "nemesis": ["choreo", "pause", "disk"], **BUSY},
        25,
    )
    # Rotation with quiet periods of their own (--nemesis-quiet).
    cases["rotate-quiet-s26"] = (
        {
            "nemesis": [
                "choreo:last-replica-pause",
                "choreo:last-replica-partition",
                "pause",
                "partition",
                "disk",
            ],
            "time_limit": 600.0,
            "nemesis_interval": 20.0,
            "nemesis_quiet": 30.0,
        },
        26,
    )
    cases["zk3-all-s21"] = (
        {"topology": "zk", "zookeepers": 3, "nemesis": list(reversed(PACKAGES)), **BUSY},
        21,
    )
    return cases


CASES = _cases()


def _plan_bytes(name: str) -> str:
    options, seed = CASES[name]
    return build_plan(validate(RunSpec.of(**options)), seed).to_json()


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_plan_is_the_stored_one_byte_for_byte(name):
    assert _plan_bytes(name) == (DATA / f"{name}.json").read_text(encoding="utf-8")


def test_every_stored_plan_has_its_case():
    assert sorted(p.stem for p in DATA.glob("*.json")) == sorted(CASES)


def write_missing() -> list[str]:
    """Writes the plans of new cases only: a stored plan is never rewritten."""
    DATA.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted(CASES):
        path = DATA / f"{name}.json"
        if not path.exists():
            path.write_text(_plan_bytes(name), encoding="utf-8")
            written.append(name)
    return written


if __name__ == "__main__":
    print("\n".join(write_missing()) or "nothing new")
