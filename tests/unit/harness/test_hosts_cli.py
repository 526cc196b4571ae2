"""`--hosts` on the cluster commands: what the inventory says cannot also be an option, and a bad
inventory ends as one line and exit code 254, before any host is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main

INVENTORY = """cluster: lab
known_hosts: kh
defaults: {user: root, key: id}
hosts:
  - {name: n1, address: 192.0.2.11, role: "broker,controller"}
"""


def kchaos(*args: str):
    return CliRunner().invoke(main, list(args))


def flat(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture
def inventory(tmp_path: Path) -> str:
    path = tmp_path / "hosts.yaml"
    path.write_text(INVENTORY)
    return str(path)


def test_a_run_on_hosts_plans_an_upgrade_as_on_docker(inventory: str):
    import json

    r = kchaos(
        "run", "--hosts", inventory, "--version", "3.9", "--upgrade-to", "4.0", "--plan-only"
    )
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    rolls = [s for s in plan["upgrade"] if s["step"] == "roll"]
    assert sorted(s["node"] for s in rolls) == ["n1", "n2", "n3"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cluster", "up", "--brokers", "5"], "--brokers: with --hosts the inventory names"),
        (["cluster", "up", "--name", "x", "--subnet", "10.0.0.0/24"], "--name, --subnet"),
        (["cluster", "down", "--name", "x"], "--name: with --hosts"),
        (["cluster", "status", "--name", "x"], "--name: with --hosts"),
    ],
)
def test_the_inventory_names_the_cluster_and_its_nodes(inventory: str, args, says):
    r = kchaos(*args, "--hosts", inventory)
    assert r.exit_code == 254 and says in flat(r)


def test_accepting_new_host_keys_needs_hosts():
    r = kchaos("cluster", "status", "--accept-new-host-keys")
    assert r.exit_code == 254 and "--accept-new-host-keys goes with --hosts" in flat(r)


@pytest.mark.parametrize("command", [["cluster", "status"], ["heal"], ["cluster", "down"]])
def test_a_bad_inventory_is_one_line(tmp_path: Path, command):
    bad = tmp_path / "hosts.yaml"
    bad.write_text("hosts: [{name: n1, address: kafka1, role: broker}]\n")
    r = kchaos(*command, "--hosts", str(bad))
    assert r.exit_code == 254
    assert "address must be an IPv4 address" in flat(r) and "Traceback" not in r.output


def test_a_run_on_hosts_takes_their_name_and_topology(inventory: str):
    import json

    r = kchaos("run", "--hosts", inventory, "--nemesis", "partition,kill", "--plan-only")
    assert r.exit_code == 0, r.output
    spec = json.loads(r.stdout)["spec"]
    assert (spec["cluster"], spec["topology"]) == ("lab", "kraft-combined")
    assert spec["hosts"] == str(Path(inventory).resolve())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--cluster", "other"], "cluster 'other': a run on the hosts"),
        (["--topology", "zk"], "topology 'zk': a run on the hosts"),
        (["--quorum", "dynamic"], "--quorum dynamic and static-to-dynamic are not supported"),
        (["--disk-layer", "journal"], "--disk-layer is not supported on SSH hosts yet"),
        (["--txn", "--nemesis", "client:isolate"], "client:isolate is not supported on SSH"),
    ],
)
def test_what_a_run_on_hosts_cannot_do_is_refused_before_it_starts(inventory: str, args, says):
    r = kchaos("run", "--hosts", inventory, *args, "--plan-only")
    assert r.exit_code == 254 and says in flat(r)
