"""The example campaign (examples/campaigns/example.yaml) run short for real, narrowed to its two
workload cells (one fault set) so that CI runs three runs, not five: stopped with Ctrl-C while its
second cell runs, then finished with --resume. Its junit.xml, campaign.json and campaign.html say
what every cell did, each linked to its run directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from clusters.docker_lifecycle import DockerCluster
from harness.exit_codes import INTERRUPTED_EXIT
from tests.integration.kafka_io import wait_until
from tests.integration.run_process import REPO

EXAMPLE = REPO / "examples" / "campaigns" / "example.yaml"
CLUSTER = "kchaos-example"  # the example's own cluster and subnet (10.213.221.0/24)


def _campaign(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "campaign", *args, "--no-progress"]


def _record(results: Path) -> dict | None:
    found = list(results.glob("example/*/campaign.json"))
    return json.loads(found[0].read_text()) if found else None


def test_the_example_campaign_stopped_mid_cell_and_resumed_finishes_every_cell(
    docker_client, tmp_path
):
    DockerCluster(docker_client, CLUSTER).remove()
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["axes"]["nemesis"] = spec["axes"]["nemesis"][:1]
    narrowed = tmp_path / "spec" / "example.yaml"
    narrowed.parent.mkdir()
    narrowed.write_text(yaml.safe_dump(spec))
    # About stopping and resuming a campaign, not the send mode: sync sends, as before.
    short = ["--set", "time_limit=12", "--set", "send_mode=sync", "--results-dir", str(tmp_path)]
    first = subprocess.Popen(
        _campaign(str(narrowed), *short),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def second_cell_recording() -> bool:
            """The second cell's run is in its workload: its clients have acknowledged ops."""
            record = _record(tmp_path)
            if first.poll() is not None:
                return True
            runs = next(tmp_path.glob("example/*/runs"), None)
            if record is None or runs is None:
                return False  # the record is written before the first cell's folder exists
            second = runs / record["cells"][1]["id"]
            return any('"type":"ok"' in h.read_text() for h in second.glob("*/history.jsonl"))

        wait_until("the second cell's workload", second_cell_recording, timeout=400, every=0.2)
        assert first.poll() is None, first.communicate()[0]
        os.kill(first.pid, signal.SIGINT)
        out, _ = first.communicate(timeout=400)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == INTERRUPTED_EXIT, out
    directory = next(tmp_path.glob("example/*"))
    stopped = json.loads((directory / "campaign.json").read_text())
    statuses = [c["status"] for c in stopped["cells"]]
    # The second cell ended as a run ends on Ctrl-C; no cell started after it.
    assert statuses[1:] == ["interrupted"], statuses
    assert statuses[0] in ("valid", "invalid", "unknown"), statuses
    assert stopped["finished"] is None
    assert ET.parse(directory / "junit.xml").getroot().get("tests") == "2"

    resumed = subprocess.run(
        _campaign(str(narrowed), *short, "--resume", str(directory)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    DockerCluster(docker_client, CLUSTER).remove()
    record = json.loads((directory / "campaign.json").read_text())
    statuses = [c["status"] for c in record["cells"]]
    assert all(s in ("valid", "invalid", "unknown") for s in statuses), (statuses, resumed.stdout)
    expected = 1 if "invalid" in statuses else 2 if "unknown" in statuses else 0
    assert resumed.returncode == record["exit_code"] == expected, resumed.stdout
    assert record["finished"] is not None
    # The first cell was not run again; the interrupted second one was.
    attempts = [
        len(list((directory / "runs" / c["id"]).glob("attempt-*.json"))) for c in record["cells"]
    ]
    assert attempts == [1, 2], attempts
    for cell in record["cells"]:
        run_dir = directory / cell["run_dir"]
        assert (run_dir / "run.json").is_file() and (run_dir / "results.json").is_file()
        assert cell["overhead_s"] > 0 and cell["kafka_version"].startswith("3.9.")
    root = ET.parse(directory / "junit.xml").getroot()
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 2
    html = (directory / "campaign.html").read_text()
    assert all(cell["report"] in html for cell in record["cells"])
    assert not DockerCluster(docker_client, CLUSTER).containers()
