"""Exit codes beyond the verdict's (0 valid, 1 invalid, 2 unknown, 255 checker crashed).

Jepsen's convention: 254 for a run that could not be done as asked (bad arguments or spec, an
unknown Kafka version, Docker not running, a cluster that never became ready), so a nightly job
tells "Kafka broke its promise" from "the job is misconfigured".
"""

BAD_INPUT_EXIT = 254
INTERRUPTED_EXIT = 130
# A run whose cluster was removed while it ran (`kchaos cluster down --force`, or by hand): not
# Kafka's verdict and not bad input. Its history and run.json are kept, unchecked.
CLUSTER_REMOVED_EXIT = 252
# A run whose client host (the child process with the Kafka clients, harness/run/supervisor.py)
# died or hung: the supervisor healed, collected and checked what was recorded; run.json says
# how it ended under "crashed".
CRASHED_RUN_EXIT = 253
# kchaos itself failed: an exception no command turned into a sentence (a kchaos bug), one line
# on stderr (harness/cli/__init__.py); the same code as a crashed checker (CRASHED_EXIT of
# checkers/core/verdict.py), never 1, which reads as an invalid verdict.
KCHAOS_FAILED_EXIT = 255
