"""The supervisor's ending of a run whose client host died or hung (harness/run/supervisor.py).

It does what the child did not get to, told by the child's last state: heal every fault any
nemesis could have left (what `kchaos heal` does: the child's fault objects died with it), keep
the history recorded so far (its torn last line, if any, is what readers ignore and note), collect
logs and metadata and tear down the cluster the run made (unless --keep-cluster), check, and
write run.json with ``crashed``. Nothing here raises for a failure of its own: each step says what
went wrong and the next one still runs, since what was recorded must outlive the crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusters.cluster import ClusterHandle
from clusters.handles import open_cluster
from harness.exit_codes import CRASHED_RUN_EXIT
from harness.run.outcome import RunResult
from harness.run.rundir import write_json
from harness.run.wrapup import check_run, collect_and_tear_down, keep_history_file, not_checked
from nemesis.heal import heal_cluster


def recover(
    run: Any, run_dir: Path, facts: dict[str, Any], crashed: dict[str, Any], seconds: float
) -> RunResult:
    """The ending of ``run`` (harness/run/supervisor.py's Supervisable) after its client host ended
    as ``crashed`` says, from the child's last ``facts``."""
    say, spec = run.say, run.spec
    say(f"{describe(crashed)}: healing, collecting and checking what it recorded")
    summary: dict[str, Any] = dict(facts.get("summary") or run.summary)
    summary["crashed"] = crashed
    made, history = bool(facts.get("made")), bool(facts.get("history"))
    cluster = _cluster(spec, say) if made else None
    if cluster is not None and not facts.get("healed"):
        summary["healed"] = _heal(cluster, say)
    if history and not facts.get("history_kept"):
        summary["ops"] = keep_history_file(run_dir, say)
    if cluster is not None and not facts.get("torn_down"):
        collect_and_tear_down(cluster, spec.cluster, spec.keep_cluster, run_dir, say)
    if history and not facts.get("checked"):
        summary["check"] = check_run(run_dir, say)
    elif not history:
        summary["check"] = not_checked(run_dir)
    summary["seconds"] = round(seconds, 1)
    summary["exit_code"] = CRASHED_RUN_EXIT
    write_json(run_dir / "run.json", summary)
    say(f'run.json says how the client host ended ("crashed"); exit code {CRASHED_RUN_EXIT}')
    return RunResult(run_dir, run.plan.seed, CRASHED_RUN_EXIT, summary)


def describe(crashed: dict[str, Any]) -> str:
    """One line for the user: how the client host ended and where."""
    if "hang" in crashed:
        how = f"hung past its {crashed['hang']['budget_s']:.0f} s budget and was killed"
    elif "signal" in crashed:
        how = f"died of {crashed['signal']}"
    else:
        how = f"exited with code {crashed.get('exit')} before reporting a result"
    return f"the client host {how} during {crashed['where']}"


def _cluster(spec: Any, say: Any) -> ClusterHandle | None:
    try:
        cluster = open_cluster(spec.cluster, getattr(spec, "hosts", None) or None, say=say)
        return cluster if cluster.exists() else None
    # Whatever the kind's library raises when its engine or hosts cannot be reached (a
    # ClusterError, Docker's or SSH's own errors): the history is still kept and checked.
    except Exception as exc:
        say(f"warning: cannot reach the cluster to heal and tear it down: {exc}")
        return None


def _heal(cluster: ClusterHandle, say: Any) -> list[str] | dict[str, str]:
    try:
        done = heal_cluster(cluster)
    except Exception as exc:  # the teardown still runs; `kchaos heal` can be tried again
        say(f"warning: healing failed: {exc}; retry: kchaos heal {cluster.cli_option()}")
        return {"error": f"{type(exc).__name__}: {exc}"}
    for action in done:
        say(f"healed: {action}")
    return done
