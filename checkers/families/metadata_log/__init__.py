"""KRaft safety from the controllers' decoded `__cluster_metadata` logs (run dir `metadata/`).

parse: DumpLogSegments text -> records; committed: which offsets are proven durable;
rules: divergence and lost fencing; lease: fenced brokers still acknowledging sends;
check: the entry `checkers.api.check` calls for a run directory.
"""
