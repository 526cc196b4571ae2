"""The checker families: each judges one part of a run and returns findings, pure over what
checkers/scan reads and checkers/core defines. checkers/registry.py adapts each to the
`Checker` protocol and lists them in the order `kchaos check` runs them.

- queue/: the queue workload's data anomalies, rule by rule, on three engines.
- cycles.py: Elle's G0/G1c over the queue's dependency edges (edges.py).
- metadata.py, migration.py: KRaft safety and migration states from observer samples.
- features.py with feature_views.py: KIP-584/KIP-778 finalized feature levels.
- quorum_membership.py: controller membership changes (KIP-853).
- groups.py: consumer-group ownership and committed offsets (KIP-848).
- admin.py: the admin workload's topics against the brokers' final views.
- foreign.py: records of another topic; fenced_acks.py: a fenced producer's acknowledgements.
- share/: KIP-932's share groups, from the share workload's ops (finality.py so far).
- data_log/, metadata_log/, zk_controller/: the collected data logs, KRaft metadata logs and
  ZooKeeper-mode controller logs.
- Read by several: observer_samples.py (observer samples and the faults around them),
  edges.py (queue -> cycles). Fault spans come from checkers/scan/fault_windows.py, which the
  report reads too.
"""
