"""How many runs `kchaos shrink` spends, without Kafka: its search against scripted oracles.

Each case is a plan and a scripted oracle, a pure function that says from a candidate plan
whether its replay fails (seeded per plan and try when it fails with a probability, so the same
case gives the same tries). The search is the real one (harness/shrink/search.py), its runs
are counted as shrink.json counts them (the original's tries and every candidate's; no
--confirm). Four searches per case:

- ``before``: the plan's order, every candidate run (the search as it was before session 19);
- ``presume``: a candidate no bigger than one rejected is not run (``search.dominated``);
- ``order``: candidates ordered by what the finding points at (harness/shrink/suspects.py);
- ``both``: what `kchaos shrink` does now.

Cases:

- ``real``: docs/shrink.md's worked example, its stored original run
  (tests/unit/harness/data/shrink_real: the plan, the finding and the nemesis timeline the
  suspects are read from); the oracle fails when the plan holds the aimed `disk:corrupt`.
  ``real-flaky``: the same, failing half the time while a fault after the corruption is kept
  (as the original reproduced 1 of 2), over 20 seeds of draws.
- ``generated``: plans of 1-5 packages drawn as `kchaos run` draws them, one or two fault
  units the cause (the oracle fails when all are kept). ``informative`` suspects: a cause
  scores 2 (names the finding's partition) or 1 (touched its node), any other unit 0, 1 or
  now and then 2; ``uninformative``: every unit's score drawn at random, the cause's too (the
  ordering's worst case).

    .venv/bin/python bench/bench_shrink.py [--cases 200] [--tries 2]

Prints a table of runs (sums over the cases) and writes bench/out/shrink.json. No goal: the
numbers are docs/shrink.md's.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.plan import Plan, build_plan, load_plan  # noqa: E402
from harness.shrink.candidates import digest, fault_units  # noqa: E402
from harness.shrink.search import Attempt, Budget, Search, new_record  # noqa: E402
from harness.shrink.suspects import unit_scores  # noqa: E402
from harness.spec import RunSpec, validate  # noqa: E402

REAL = ROOT / "tests" / "unit" / "harness" / "data" / "shrink_real"
FAILING = "replica-missing-committed-records"
PACKAGES = ("partition", "kill", "pause", "clock", "packet")
CONFIGS = {"before": (False, False), "presume": (False, True), "order": (True, False)}
CONFIGS["both"] = (True, True)


class ScriptedOracle:
    """A replay decided from the plan: it fails with probability ``p(plan)`` (0: never); each
    plan's n-th try has its own seeded draw, so the same tries give the same verdicts."""

    def __init__(self, p: Callable[[Plan], float], stream: str = "") -> None:
        self.p, self.stream = p, stream
        self.calls: list[str] = []

    def __call__(self, plan: Plan, folder: Path | None) -> Attempt:
        d = digest(plan)
        n = self.calls.count(d)
        self.calls.append(d)
        fails = random.Random(f"{self.stream}/{d}/{n}").random() < self.p(plan)
        return Attempt("invalid" if fails else "valid", [FAILING] if fails else [], None, 1.0)


@dataclass
class Outcome:
    runs: int  # as shrink.json counts them
    status: str
    record: dict
    best: Plan


def shrink(
    plan: Plan,
    oracle: ScriptedOracle,
    scores: dict[str, int],
    presume: bool,
    tries: int = 2,
    max_runs: int = 400,
) -> Outcome:
    """One search to its end (or ``max_runs``) against ``oracle``."""
    record = new_record("original", [FAILING], Budget(tries=tries, max_runs=max_runs))
    record["suspects"] = dict(scores)
    search = Search(plan, oracle, record, presume=presume)
    status = search.run()
    return Outcome(record["runs"], status, record, search.current)


def real_example() -> tuple[Plan, dict[str, int]]:
    """The worked example's original plan and the suspects its run's evidence gives."""
    plan = load_plan(REAL)
    return plan, unit_scores(REAL, plan, [FAILING])


def _seeds_of(plan: Plan, fault: str, kind: str) -> set[int]:
    return {s.seed for s in plan.faults if s.fault == fault and s.kind == kind}


def real_oracle(original: Plan, flaky: bool, stream: str = "") -> ScriptedOracle:
    corrupt = _seeds_of(original, "disk", "corrupt")
    (at,) = {s.at_s for s in original.faults if s.seed in corrupt and s.action == "start"}
    later = {s.seed for s in original.faults if s.action == "start" and s.at_s > at}

    def p(plan: Plan) -> float:
        if not {s.seed for s in plan.faults} & corrupt:
            return 0.0
        return 0.5 if flaky and {s.seed for s in plan.faults} & later else 1.0

    return ScriptedOracle(p, stream)


def generated(case: int, informative: bool) -> tuple[Plan, ScriptedOracle, dict[str, int]]:
    """Case ``case``'s plan, its oracle (the cause's units all kept: fails) and suspects."""
    rng = random.Random(f"shrink-bench/{case}")
    packages = rng.sample(PACKAGES, rng.randint(1, len(PACKAGES)))
    spec = RunSpec.of(
        nemesis=packages,
        time_limit=rng.choice((30.0, 60.0, 100.0)),
        nemesis_interval=rng.choice((3.0, 5.0)),
        concurrency=rng.randint(1, 6),
        rate=rng.choice((10.0, 50.0)),
    )
    plan = build_plan(validate(spec), rng.randrange(2**32))
    units = fault_units(plan.faults)
    if not units:
        return plan, ScriptedOracle(lambda p: 0.0), {}
    cause = rng.sample(range(len(units)), min(len(units), rng.choice((1, 1, 2))))
    seeds = [plan.faults[units[i][0]].seed for i in cause]

    def p(candidate: Plan) -> float:
        kept = {s.seed for s in candidate.faults}
        return 1.0 if all(s in kept for s in seeds) else 0.0

    scores: dict[str, int] = {}
    for i, unit in enumerate(units):
        if informative:
            s = rng.choice((2, 2, 1)) if i in cause else rng.choice((0, 0, 0, 1, 1, 2))
        else:
            s = rng.choice((0, 1, 2))
        for j in unit:
            scores[str(plan.faults[j].seed)] = s
    return plan, ScriptedOracle(p, f"case {case}"), scores


def _runs(plan: Plan, oracle_of: Callable[[], ScriptedOracle], scores: dict[str, int],
          tries: int) -> dict[str, int]:  # fmt: skip
    out = {}
    for name, (ordered, presume) in CONFIGS.items():
        out[name] = shrink(plan, oracle_of(), scores if ordered else {}, presume, tries).runs
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--tries", type=int, default=2)
    args = ap.parse_args(argv)
    rows: dict[str, dict[str, int]] = {}
    plan, scores = real_example()
    rows["real"] = _runs(plan, lambda: real_oracle(plan, False), scores, args.tries)
    flaky = {name: 0 for name in CONFIGS}
    for seed in range(20):
        got = _runs(plan, lambda s=seed: real_oracle(plan, True, f"{s}"), scores, args.tries)
        flaky = {k: flaky[k] + got[k] for k in CONFIGS}
    rows["real-flaky (20 seeds)"] = flaky
    for informative in (True, False):
        total = {name: 0 for name in CONFIGS}
        for case in range(args.cases):
            p, oracle, s = generated(case, informative)
            got = _runs(p, lambda o=oracle: ScriptedOracle(o.p, o.stream), s, args.tries)
            total = {k: total[k] + got[k] for k in CONFIGS}
        label = "informative" if informative else "uninformative"
        rows[f"generated, {label} ({args.cases})"] = total
    width = max(len(k) for k in rows)
    print(
        f"{'runs (tries ' + str(args.tries) + ')':<{width}}  "
        + "  ".join(f"{c:>8}" for c in CONFIGS)
    )
    for name, row in rows.items():
        print(f"{name:<{width}}  " + "  ".join(f"{row[c]:>8}" for c in CONFIGS))
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "shrink.json").write_text(json.dumps({"tries": args.tries, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
