"""Liveness verdicts (issue 33): did Kafka stay available where it promised to? A result class
of their own beside the safety verdict (results.json `liveness`, summary.txt, report.html,
a campaign's junit.xml); whether a finding fails the run is the run option `--liveness`
(plan.json spec `liveness`: report, the default, or fail).

bounds.py: every bound, derived from the run's timing (cluster.json) and stated; health.py:
when a connected majority of the cluster was healthy (the fault spans of
checkers/scan/fault_windows.py); progress.py: no progress while a majority is healthy, and the
recovery time after the last heal; registration.py: brokers fenced or unregistered and
controllers unregistered long after the last heal (the committed metadata log); offline.py: a
partition without a leader while a live replica of its ISR exists; assignment.py: a consumer
group that holds no partition for long; fatal.py: fatal lines in the nodes' logs; check.py: the
whole, and the verdict's liveness block.
"""
