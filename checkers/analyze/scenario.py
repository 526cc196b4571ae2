"""A scenario: what a run tests, without its seed, as one stable name.

`scenario(spec)` is the name `kchaos analyze` groups runs by across nights, and the name a
campaign gives its cells, so both must come from this one pure function of spec.json's dict.

The name is ``workload/topology/version/nemesis`` and, when the run used any, ``/options``:

- ``version`` is the requested one (spec ``version``, e.g. ``3.9``): a scenario asked of "3.9"
  stays the same scenario when 3.9's newest patch release changes; the release that ran is a
  property of the run, not of the scenario.
- ``nemesis`` is the requested items, sorted and ``+``-joined, or ``none``.
- ``options`` are every other option whose value differs from the run's default, sorted by
  name and ``,``-joined, in the command line's spelling: ``txn`` for a boolean turned on,
  ``no-txn`` for one turned off, ``name=value`` otherwise (``mode=subscribe``,
  ``upgrade-to=4.0``, ``time-limit=60``). Options that say where or how a run is kept rather
  than what it tests (seed, name, cluster, subnet, results_dir, keep_cluster) are left out.

Example: ``queue/kraft-combined/3.9/kill+partition/time-limit=60,txn``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# harness/spec.py's RunSpec defaults (checkers/ cannot import harness/);
# tests/unit/checkers/test_analyze_scenario.py fails when the two differ.
DEFAULTS: dict[str, Any] = {
    "workload": "queue",
    "topology": "kraft-combined",
    "zookeepers": 1,
    "version": "3.9",
    "nemesis": [],
    "time_limit": 30.0,
    "concurrency": 4,
    "rate": 50.0,
    "nemesis_interval": 10.0,
    "timing": "default",
    "keys": 8,
    "txn": False,
    "mode": "assign",
    "final_timeout": 60.0,
    "upgrade_to": None,
    "downgrade_to": None,
    "quorum": None,
    "availability": None,
    "send_mode": None,
    "in_flight": None,
    "linger_ms": None,
    "batch_size": None,
    "features": None,
    "client": None,
    "client_version": None,
    "group_protocol": None,
    "txn_protocol": None,
}
# Where and how a run is kept, not what it tests.
NOT_SCENARIO = frozenset(
    {"seed", "name", "cluster", "subnet", "results_dir", "keep_cluster", "replay_of"}
)
# The values spec.py's to_dict drops as "what every earlier run had".
_SAME_AS_DEFAULT = {
    "quorum": "static",
    "availability": "report",
    "send_mode": "sync",
    "client": "librdkafka",
    "group_protocol": "classic",
}
_HEAD = ("workload", "topology", "version", "nemesis")


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return "+".join(sorted(map(str, value)))
    return str(value)


def _is_default(name: str, value: Any) -> bool:
    if name in _SAME_AS_DEFAULT and value == _SAME_AS_DEFAULT[name]:
        return True
    default = DEFAULTS.get(name)
    if isinstance(default, float | int) and not isinstance(default, bool):
        try:
            return float(value) == float(default)
        except (TypeError, ValueError):
            return False
    return value == default


def nemesis_items(spec: Mapping[str, Any]) -> list[str]:
    """The requested nemesis items, sorted (a spec file may give a comma-separated string)."""
    raw = spec.get("nemesis") or []
    items = [v.strip() for v in raw.split(",")] if isinstance(raw, str) else list(raw)
    return sorted(str(v) for v in items if str(v))


def scenario(spec: Mapping[str, Any]) -> str:
    """The scenario name of a run's spec (spec.json's dict, or a campaign cell's): see above."""
    head = [
        str(spec.get("workload") or DEFAULTS["workload"]),
        str(spec.get("topology") or DEFAULTS["topology"]),
        str(spec.get("version") or DEFAULTS["version"]),
        "+".join(nemesis_items(spec)) or "none",
    ]
    options = []
    for name in sorted(spec):
        value = spec[name]
        if name in _HEAD or name in NOT_SCENARIO or value is None or _is_default(name, value):
            continue
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            options.append(flag if value else f"no-{flag}")
        else:
            options.append(f"{flag}={_text(value)}")
    return "/".join(head + ([",".join(options)] if options else []))
