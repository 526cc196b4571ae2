"""Real Kafka clusters on Docker: assembling Kafka from Maven Central, the node base image,
topologies, bringing clusters up and down, and the node-control interface (exec, files, process
signals, logs) that nemeses and workloads use.

Owns everything that touches Docker. Knows nothing about histories, generators or checkers.
"""
