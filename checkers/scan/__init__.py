"""How the checkers read a stored history: into numpy arrays and Python rows, locally or with
Spark. Pure reading; what the data means is the families' business.

- load.py: a stored history read in one pass into what the local checks take.
- columns.py: Arrow columns as numpy arrays; npsets.py: set operations on int64 arrays.
- op_rows.py, op_stream.py: op rows as dicts (one or a batch at a time); op_arrays.py and
  queue_ops.py: queue ops as integer columns for the cycle search.
- fault_windows.py: per-node fault spans (wall or run time) from the faults' recorded effects,
  the one computation the lease checks and the report share.
- spark_session.py: the one place that starts Spark; spark_cluster.py: a local standalone
  cluster or Connect server from pyspark's own jars.
"""
