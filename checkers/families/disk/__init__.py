"""Disk faults judged from the history (docs/checkers.md, "Disk corruption"): what a read was
served from a file a ``disk:corrupt`` step damaged, and whether Kafka noticed the damage
(corruption.py). The steps' records are history/disk_faults.py's.
"""
