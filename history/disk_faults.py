"""What the disk package's corrupt and disk-full steps record, as both sides read it: the
nemesis that writes it (nemesis/disk.py, nemesis/kafka_said.py) and the checks that judge it
(checkers/families/disk/). docs/history.md, "Disk faults", and docs/disk.md say what each field
means.

A ``start-disk`` completion of kind ``corrupt`` holds ``corrupted``: per node, the file damaged
(``path`` under the layer's mountpoint, and ``topic`` and ``partition`` for a partition's file)
and the layer's answer. A ``stop-disk`` completion of a corrupt or disk-full step holds
``kafka_said``: per Kafka node, the lines it logged since the start that match one of the
labels below (``lines``: ``[[labels], line]``, ``count``, ``labels``).
"""

from __future__ import annotations

START_DISK, STOP_DISK = "start-disk", "stop-disk"
CORRUPT, DISK_FULL = "corrupt", "disk-full"
CORRUPTED = "corrupted"  # start: node -> what was damaged
KAFKA_SAID = "kafka_said"  # stop: node -> what Kafka logged

# The labels of what Kafka logged (nemesis/kafka_said.py PATTERNS).
CORRUPT_RECORD = "corrupt-record"  # a record batch failed its CRC or would not parse
INVALID_MESSAGES = "invalid-messages"  # log recovery truncated a segment at a bad batch
DAMAGED = "corrupted"  # Kafka's own word for an index, snapshot or segment it found damaged
CHECKPOINT = "checkpoint"  # a checkpoint file Kafka could not read
STORAGE = "storage"  # a log directory failed (I/O error, full disk) or went offline
FATAL = "fatal"  # the process gave up (halt, exit, fatal error)
STRAY = "stray"  # a partition's log Kafka set aside as not the topic's (a topic id that differs)
NAMES_FILE = "names-file"  # a warning or error naming the file the fault touched
ERROR = "error"  # context only: an error line that matches none of the above
# Lines with any of these say Kafka noticed a damaged file or a failed disk.
DETECTION = frozenset(
    {CORRUPT_RECORD, INVALID_MESSAGES, DAMAGED, CHECKPOINT, STORAGE, FATAL, STRAY, NAMES_FILE}
)
