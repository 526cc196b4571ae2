"""Checkers: pure functions from a history to findings (Spark for scale, networkx for cycles).

`kchaos check` runs the registry (registry.py) of checkers (checker.Checker) over one run's
inputs (inputs.RunInputs, each read once and only when asked), combines their findings in one
place (verdict.decide) and lists every kind they can report in kinds.py. The queue family's
rules live in queue/rules/, its engines behind queue/dispatch.py. docs/architecture.md.

Must never import Docker, Kafka clients, nemeses or anything that runs a cluster (a unit test,
tests/unit/test_layering.py, holds it).
"""
