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

What a default is, and which options say where a run is kept, the options' declarations say
(history/options.py, the harness's on harness/spec.py RunSpec and each workload kind's), and
checkers/ cannot import those: the caller hands them in as ``ScenarioTerms`` (harness/spec.py
``scenario_terms()``; `kchaos analyze` is built with them by harness/cli/__init__.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Keys earlier spec.json files may carry that were never options of what a run tests.
_NEVER_TESTED = frozenset({"replay_of"})
_HEAD = ("workload", "topology", "version", "nemesis")


@dataclass(frozen=True)
class ScenarioTerms:
    """Of every run option: the values that mean what a run without it does (its default, and
    the values spec.json drops as "what every earlier run had"), and the options that say
    where or how a run is kept (seed, name, cluster, ...), not what it tests."""

    defaults: Mapping[str, tuple[Any, ...]]
    kept: frozenset[str]


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return "+".join(sorted(map(str, value)))
    return str(value)


def _is_default(name: str, value: Any, terms: ScenarioTerms) -> bool:
    return any(_same(value, default) for default in terms.defaults.get(name, (None,)))


def _same(value: Any, default: Any) -> bool:
    if isinstance(default, float | int) and not isinstance(default, bool):
        try:
            return float(value) == float(default)
        except (TypeError, ValueError):
            return False
    return bool(value == default)


def nemesis_items(spec: Mapping[str, Any]) -> list[str]:
    """The requested nemesis items, sorted (a spec file may give a comma-separated string)."""
    raw = spec.get("nemesis") or []
    items = [v.strip() for v in raw.split(",")] if isinstance(raw, str) else list(raw)
    return sorted(str(v) for v in items if str(v))


def scenario(spec: Mapping[str, Any], terms: ScenarioTerms) -> str:
    """The scenario name of a run's spec (spec.json's dict, or a campaign cell's): see above."""
    head = [
        str(spec.get(name) or terms.defaults[name][0])
        for name in ("workload", "topology", "version")
    ] + ["+".join(nemesis_items(spec)) or "none"]
    options = []
    skip = terms.kept | _NEVER_TESTED
    for name in sorted(spec):
        value = spec[name]
        if name in _HEAD or name in skip or value is None or _is_default(name, value, terms):
            continue
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            options.append(flag if value else f"no-{flag}")
        else:
            options.append(f"{flag}={_text(value)}")
    return "/".join(head + ([",".join(options)] if options else []))
