"""The checkers' framework: what a checker is, what it reads and says, and how findings become
a verdict. A family joins it through checkers/registry.py; the framework itself reads a run's
logs with the families' parsers (inputs.py), quotes each family's rule sentences (kinds.py) and
applies the writer's tolerances (checker.py, queue/policy.py).

- checker.py: the `Checker` protocol, `run_checkers` (the registry in order) and `compose`.
- checker_result.py: `CheckerResult`, what one checker says.
- inputs.py: `RunInputs` (everything a checker may read of a run, each read once, when first
  asked) and `Needs` (what a checker declares it reads).
- findings.py: `Finding`, what every checker returns.
- kinds.py: every anomaly kind, its rule, its outcome per mode and the checker that reports it.
- verdict.py: `decide` (invalid > unknown > valid), results.json and summary.txt.
- run_files.py: the files a run directory holds beside its history.
- memory.py: how a check asks the C allocators for memory.
"""
