"""Checkers: pure functions from a stored run to findings (Spark for scale, networkx for cycles).

Four rooms and the entries beside them:

- core/: the framework every checker plugs into: the `Checker` protocol and `compose`
  (checker.py), `CheckerResult`, `RunInputs` and `Needs` (inputs.py: a run's inputs, each read
  once and only when asked), `Finding`, every anomaly kind (kinds.py), the verdict
  (verdict.py), the run files beside a history, how the check asks for memory.
- scan/: how a stored history is read into what checks take: Arrow columns and numpy arrays,
  op rows and op streams, the load in one pass, set operations on arrays, the Spark session
  and a local Spark cluster.
- families/: the checker families, each pure over what scan/ and core/ hand it: the queue's
  rules and engines (queue/), the cycle search, KRaft metadata, migration, features,
  controller membership, consumer groups, admin, the data and metadata logs, ZooKeeper
  controllers, foreign records, fenced acknowledgements, and what several of them read
  (observer samples, fault windows, dependency edges).
- report/ and analyze/: report.html of one run, and the analysis across many runs.

registry.py lists the families `kchaos check` runs, in order (the one place a family joins the
framework); api.py checks a stored run (`check`), table_check.py an in-memory history;
cli.py is `kchaos check`. docs/architecture.md.

Must never import Docker, Kafka clients, nemeses or anything that runs a cluster (a unit test,
tests/unit/test_layering.py, holds it).
"""
