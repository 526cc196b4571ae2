"""Queue-workload data anomalies (Jepsen's Kafka checker names) and the ww/wr dependency edges
the cycle search takes, decided key by key.

- rules/: one module per anomaly family, each with its kinds, its reference form (one key,
  Python, over key_log.KeyLog), its vectorised form (many keys, numpy, over logs.Logs) and
  its wording; dependencies.py makes the edges the same two ways.
- engine.py: what an engine is (QueueEngine) and how one runs: one QueueContext
  (context.queue_context), then the engine's check. Engines: per_key.ReferenceEngine (the
  reference forms, the yardstick), vector.LocalEngine (the vectorised forms in this process),
  spark.SparkEngine (the vectorised forms per hash bucket of the key, one shuffle).
- dispatch.py: the engines by name, the one place one is chosen (run_engine).
- check.py: which ops reset a consumer's position, and the entries older callers use.
- policy.py: which kinds are tolerated, and why.
"""
