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

# Every command's exit codes, one table: README.md "Exit codes" is this table
# (tests/unit/harness/test_bad_input_cli.py holds them equal). (code, what it means, commands.)
VERDICT_COMMANDS = "run, check, campaign"
EXIT_CODES: tuple[tuple[int, str, str], ...] = (
    (
        0,
        "done; for a verdict: valid (a run also read back every acknowledged send)",
        "every command",
    ),
    (
        1,
        "invalid: the checkers found anomalies (a run: or its final reads were incomplete; a "
        "campaign: any cell invalid)",
        VERDICT_COMMANDS,
    ),
    (
        2,
        "unknown: the checkers could not decide (a campaign: any cell unknown or crashed; check: "
        "also a history it could not read; shrink: the original did not fail again)",
        VERDICT_COMMANDS + ", shrink",
    ),
    (
        INTERRUPTED_EXIT,
        "interrupted (Ctrl-C, SIGTERM); a run heals and keeps its history",
        "every command",
    ),
    (
        CLUSTER_REMOVED_EXIT,
        "the run's cluster was removed while it ran (history kept, not checked)",
        "run",
    ),
    (
        CRASHED_RUN_EXIT,
        "the run's client host crashed or hung (healed, collected, what it recorded checked)",
        "run",
    ),
    (
        BAD_INPUT_EXIT,
        "bad input, or it could not be done as asked: a bad option, spec or file, an unknown "
        "Kafka version, Docker not running, a cluster that never became ready or that another "
        "run holds",
        "every command",
    ),
    (
        KCHAOS_FAILED_EXIT,
        "kchaos itself failed: a checker crashed, or a kchaos bug (one line on stderr; "
        "KCHAOS_TRACEBACK=1 shows the traceback)",
        "every command",
    ),
)


def exit_code_table() -> str:
    """README.md's "Exit codes" table, in Markdown."""
    rows = ["| code | means | commands |", "|---|---|---|"]
    rows += [f"| {code} | {means} | {commands} |" for code, means, commands in EXIT_CODES]
    return "\n".join(rows) + "\n"
