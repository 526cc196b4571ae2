"""The checkers' framework: what a checker is, what it reads and says, and how findings become
a verdict. Nothing here knows a family's rules; families plug in through checkers/registry.py.

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
