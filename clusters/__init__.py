"""Real Kafka clusters: assembling Kafka from Maven Central, the node base image, topologies,
bringing clusters up and down on Docker, and the node capabilities (exec, files, process
signals, logs) that nemeses, status and collection act through.

Owns everything that touches Docker, behind two protocols callers are typed against:
``capabilities`` (what one node can do) and ``cluster`` (a running cluster). Knows nothing
about generators or checkers; takes only the run directory's file names from history/.
"""
