"""Real Kafka clusters: assembling Kafka from Maven Central, the node base image, topologies,
bringing clusters up and down on Docker or on SSH hosts, and the node capabilities (exec, files,
process signals, logs) that nemeses, status and collection act through.

Owns everything that touches Docker and SSH, behind the protocols callers are typed against:
``capabilities`` (what one node can do) and ``cluster`` (a running cluster, and the whole
``ClusterHandle`` the harness holds), opened by ``handles`` from where the cluster lives. Knows
nothing about generators or checkers; takes only the run directory's file names from history/.
"""
