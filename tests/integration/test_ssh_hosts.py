"""A Kafka cluster on SSH hosts, the path a user takes against real machines.

`kchaos hosts up` makes three SSH hosts on this machine (containers of the node image with sshd,
on an internal network) and their hosts.yaml. Everything after that goes over SSH alone: every
command on the SSH path runs with DOCKER_HOST pointing at a socket that does not exist, so a
Docker call anywhere on it would fail the test. On the hosts: `cluster up|status|logs|down
--hosts`, a 30 s queue run with partition and kill started by a one-cell campaign (checked
VALID, both faults carried out and healed, nothing left on the hosts), a rolling upgrade from
3.9 to 4.0 (slow: nightly), `heal --hosts` after faults left behind, and host-key verification
(an unknown host and a changed key are refused).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusters.inventory import load_inventory
from clusters.ssh_session import SshSession

NAME = "sshit"
SUBNET = "10.213.175.0/24"
# At 5 s intervals: partition random-halves, kill one, partition random-halves again, the last
# still on when the time limit comes (the ending's heal undoes it over SSH). Kinds that need an
# active controller could rightly not apply right after a kill, so they are not drawn here.
SEED = 10
REPO = Path(__file__).parents[2]
NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent/kchaos-ssh-path-has-no-docker.sock"}


def kchaos(*args: str, docker: bool = False, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, **({} if docker else NO_DOCKER)}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def said(done: subprocess.CompletedProcess) -> str:
    return " ".join((done.stdout + done.stderr).split())


@pytest.fixture(scope="module")
def hosts_yaml():
    kchaos("hosts", "down", "--name", NAME, docker=True)  # an interrupted earlier test's
    up = kchaos("hosts", "up", "--name", NAME, "--subnet", SUBNET, docker=True)
    assert up.returncode == 0, said(up)
    path = Path(up.stdout.strip().splitlines()[-1])
    yield path
    # Whatever a failed test left: the cluster first (over SSH), then the hosts.
    kchaos("cluster", "down", "--hosts", str(path))
    down = kchaos("hosts", "down", "--name", NAME, docker=True)
    assert down.returncode == 0, said(down)
    assert not path.exists()
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=kchaos.hosts={NAME}"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == "", "hosts down left containers"


def on_host(hosts_yaml: Path, name: str, cmd: list[str]) -> str:
    inv = load_inventory(hosts_yaml)
    session = SshSession(inv.host(name), inv.known_hosts)
    try:
        code, out, err = session.run(cmd, timeout=30)
    finally:
        session.close()
    assert code == 0, err
    return out.decode()


def test_the_hosts_are_reached_as_a_non_root_user_with_sudo_and_verified_keys(hosts_yaml: Path):
    inv = load_inventory(hosts_yaml)
    assert [h.address for h in inv.hosts] == ["10.213.175.11", "10.213.175.12", "10.213.175.13"]
    assert all(h.user == "kchaos" and h.sudo for h in inv.hosts)
    assert on_host(hosts_yaml, "n1", ["id", "-u"]).strip() == "0"  # through sudo -n
    lines = inv.known_hosts.read_text().splitlines()
    assert [line.split()[0] for line in lines] == [h.address for h in inv.hosts]


def test_an_unknown_host_and_a_changed_key_are_refused(hosts_yaml: Path, tmp_path: Path):
    inv = load_inventory(hosts_yaml)
    text = hosts_yaml.read_text().replace("known_hosts: known_hosts", "known_hosts: kh")
    keys = inv.known_hosts.read_text().splitlines()
    key = str(inv.hosts[0].key)
    # n1's line names n2's key; n2 and n3 are missing.
    (tmp_path / "kh").write_text(keys[0].split()[0] + " " + " ".join(keys[1].split()[1:]) + "\n")
    (tmp_path / "hosts.yaml").write_text(text.replace("key: id_ed25519", f"key: {key}"))
    r = kchaos("cluster", "status", "--hosts", str(tmp_path / "hosts.yaml"))
    assert r.returncode == 254
    # n1 is asked first: its key is not the one known_hosts has for it.
    assert "its host key" in said(r) and "refusing to connect" in said(r)
    (tmp_path / "kh").write_text("")
    r = kchaos("cluster", "status", "--hosts", str(tmp_path / "hosts.yaml"))
    assert r.returncode == 254 and "is not in" in said(r) and "accept new host keys" in said(r)
    # Accepting new keys on purpose adds them, and says so for each.
    r = kchaos(
        "cluster", "status", "--hosts", str(tmp_path / "hosts.yaml"), "--accept-new-host-keys"
    )
    assert "accepted its ssh-ed25519 key" in said(r)
    assert len((tmp_path / "kh").read_text().splitlines()) == 3
    assert "no cluster 'sshit' is up" in said(r)


def test_a_cluster_comes_up_over_ssh_is_healed_and_collected(hosts_yaml: Path, tmp_path: Path):
    h = str(hosts_yaml)
    up = kchaos("cluster", "up", "--hosts", h, "--timing", "fast")
    assert up.returncode == 0, said(up)
    assert "10.213.175.11:9092,10.213.175.12:9092,10.213.175.13:9092" in said(up)
    st = kchaos("cluster", "status", "--hosts", h, "--json")
    status = json.loads(st.stdout)
    assert [n["process"] for n in status["nodes"]] == ["running"] * 3
    assert status["quorum"]["agreed"] and len(status["quorum"]["active_controllers"]) == 1
    logs = kchaos("cluster", "logs", "--hosts", h, "n2", "--tail", "5")
    assert logs.returncode == 0 and len(logs.stdout.splitlines()) == 5
    # Faults left behind, as by a crashed run: heal --hosts undoes them, killed JVM included.
    left = subprocess.run(
        [sys.executable, "-m", "tests.integration.ssh_faults", h],
        cwd=REPO,
        env={**os.environ, **NO_DOCKER},
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert left.returncode == 0, left.stderr
    healed = kchaos("heal", "--hosts", h)
    assert healed.returncode == 0, said(healed)
    for action in ("started exited node", "removed iptables chain KCHAOS", "sent SIGCONT"):
        assert action in said(healed)
    assert "KCHAOS" not in on_host(hosts_yaml, "n1", ["iptables", "-S"])
    again = kchaos("heal", "--hosts", h)
    assert "no fault was in place" in said(again)
    down = kchaos("cluster", "down", "--hosts", h, "--collect", str(tmp_path))
    assert down.returncode == 0, said(down)
    assert sorted(p.name for p in (tmp_path / "metadata").glob("*.txt")) == [
        "n1.txt",
        "n2.txt",
        "n3.txt",
    ]
    assert (tmp_path / "logs" / "n1" / "kafka" / "server.properties").exists()
    assert "no cluster" in said(kchaos("cluster", "status", "--hosts", h))


# Slow (`make nightly`): make test must stay under 45 min (session 19 rehearsal: 46).
@pytest.mark.slow
def test_a_queue_run_with_partition_and_kill_over_ssh_is_valid(hosts_yaml: Path, tmp_path: Path):
    """The run as a nightly campaign on the hosts starts it (a one-cell campaign: the cell is
    `kchaos run --spec` with the inventory, after a `cluster down --hosts`)."""
    spec = tmp_path / "night.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "ssh",
                "base": {
                    "hosts": str(hosts_yaml),
                    "time_limit": 30,
                    "nemesis_interval": 5,
                    "timing": "fast",
                    # About SSH hosts, not the send mode: sync sends, as before.
                    "send_mode": "sync",
                },
                "axes": {"nemesis": ["partition,kill"]},
                "seeds": [SEED],
            }
        )
    )
    run = kchaos("campaign", str(spec), "--results-dir", str(tmp_path), "--no-progress")
    assert run.returncode == 0, said(run)[-3000:]
    (campaign,) = (tmp_path / "ssh").glob("2*")
    (cell,) = json.loads((campaign / "campaign.json").read_text())["cells"]
    assert cell["status"] == "valid", cell
    run_dir = campaign / cell["run_dir"]
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["check"]["status"] == "valid"
    assert summary["final_reads"]["complete"] and not summary["final_reads"]["missing"]
    timeline = json.loads((run_dir / "nemesis.json").read_text())["timeline"]
    done = {(t["f"], t["type"]) for t in timeline}
    assert {("start-partition", "ok"), ("start-kill", "ok"), ("stop-kill", "ok")} <= done
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["hosts"] == str(hosts_yaml) and spec["cluster"] == NAME
    # Collected as on Docker: node logs, decoded metadata logs, the queue's data logs.
    assert len(list((run_dir / "metadata").glob("*.txt"))) == 3
    assert len(list((run_dir / "data").glob("*.decoded.json"))) == 3
    # Torn down: no JVM, no chain, no state on any host.
    for name in ("n1", "n2", "n3"):
        assert "KCHAOS" not in on_host(hosts_yaml, name, ["iptables", "-S"])
        assert "java" not in on_host(hosts_yaml, name, ["ps", "-eo", "comm"])
        assert "no" in on_host(
            hosts_yaml, name, ["sh", "-c", "test -e /opt/kchaos/cluster.json || echo no"]
        )


# The roll itself is test_run_upgrade's on Docker; over SSH it adds the second release's SFTP
# install, a version path for the nightly run (make nightly), not every CI run.
@pytest.mark.slow
def test_a_rolling_upgrade_over_ssh_rolls_every_host_and_finalizes(
    hosts_yaml: Path, tmp_path: Path
):
    """3.9 to 4.0 on the hosts: the second release is installed by SFTP, each node restarted
    on its jars, then metadata.version and the other features finalized; the run is judged."""
    run = kchaos(
        "run", "--hosts", str(hosts_yaml), "--version", "3.9", "--upgrade-to", "4.0",
        "--time-limit", "60", "--timing", "fast", "--seed", "1", "--send-mode", "sync",
        "--name", "sshup", "--results-dir", str(tmp_path),
    )  # fmt: skip
    assert run.returncode == 0, said(run)[-3000:]
    run_dir = next((tmp_path / "sshup").glob("2*"))
    upgrade = json.loads((run_dir / "upgrade.json").read_text())
    assert upgrade["completed"], upgrade
    rolled = {s["node"]: s["version"] for s in upgrade["steps"] if s["step"] == "roll"}
    assert rolled == {"n1": "4.0.2", "n2": "4.0.2", "n3": "4.0.2"}
    finalized = {
        f: lv for s in upgrade["steps"] if s["step"] == "features" and s["type"] == "ok"
        for f, lv in s["params"]["levels"].items()
    }  # fmt: skip
    assert finalized.get("metadata.version", 0) >= 25
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["check"]["status"] == "valid"
