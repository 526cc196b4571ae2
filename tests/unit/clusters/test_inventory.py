"""hosts.yaml: read, checked field by field, written back the same, and turned into a topology."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest
import yaml

from clusters.errors import ClusterError
from clusters.inventory import (
    DEFAULT_DATA_DIR,
    DEFAULT_INSTALL_DIR,
    dump_inventory,
    load_inventory,
    parse_inventory,
)
from clusters.ssh_hosts import image_tag, known_hosts_line, new_key


def three(**defaults) -> dict:
    return {
        "cluster": "lab",
        "known_hosts": "kh",
        "defaults": {"user": "ops", "key": "id", **defaults},
        "hosts": [
            {"name": f"n{i}", "address": f"192.0.2.{10 + i}", "role": "broker,controller"}
            for i in (1, 2, 3)
        ],
    }


def test_an_inventory_gives_hosts_with_defaults_and_a_combined_topology(tmp_path: Path):
    inv = parse_inventory(three(), tmp_path)
    assert inv.cluster == "lab"
    assert inv.known_hosts == (tmp_path / "kh").resolve()
    h = inv.host("n2")
    assert (h.address, h.port, h.user, h.key) == (
        "192.0.2.12",
        22,
        "ops",
        (tmp_path / "id").resolve(),
    )
    assert (h.install_dir, h.data_dir, h.interface) == (
        DEFAULT_INSTALL_DIR,
        DEFAULT_DATA_DIR,
        "eth0",
    )
    assert h.sudo and not h.agent
    topo = inv.topology()
    assert topo.kind == "kraft-combined"
    assert [(n.name, n.node_id, n.ip) for n in topo.nodes] == [
        ("n1", 1, "192.0.2.11"),
        ("n2", 2, "192.0.2.12"),
        ("n3", 3, "192.0.2.13"),
    ]
    assert topo.bootstrap_servers() == "192.0.2.11:9092,192.0.2.12:9092,192.0.2.13:9092"


def test_root_needs_no_sudo_and_no_key_means_the_agent(tmp_path: Path):
    data = three()
    data["defaults"] = {"user": "root"}
    h = parse_inventory(data, tmp_path).hosts[0]
    assert not h.sudo and h.agent and h.key is None


def test_dedicated_roles_make_a_kraft_topology_with_given_ids(tmp_path: Path):
    data = three()
    data["hosts"][0]["role"] = ["controller"]
    data["hosts"][1]["role"] = "broker"
    data["hosts"][2]["role"] = "broker"
    data["hosts"][2]["node_id"] = 7
    topo = parse_inventory(data, tmp_path).topology()
    assert topo.kind == "kraft"
    assert [n.node_id for n in topo.nodes] == [1, 2, 7]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d["hosts"][1].update(address="192.0.2.11"), "two hosts have the address"),
        (lambda d: d["hosts"][1].update(name="n1"), "two hosts have the name"),
        (lambda d: d["hosts"][0].update(address="kafka1.example"), "IPv4 address"),
        (lambda d: d["hosts"][0].update(role="leader"), "unknown role leader"),
        (lambda d: d["hosts"][0].update(role="broker"), "make no topology"),
        (lambda d: d["hosts"][0].update(port=0), "TCP port"),
        (lambda d: d["hosts"][0].update(data_dir="data"), "absolute path"),
        (lambda d: d["hosts"][0].update(install_dir="/"), "must not be /"),
        (lambda d: d["hosts"][0].update(colour="red"), "unknown field colour"),
        (lambda d: d.update(hosts=[]), "non-empty list"),
        (lambda d: d.update(extra=1), "unknown key extra"),
        (lambda d: d["defaults"].update(address="192.0.2.1"), "each host has its own"),
        (lambda d: d.update(accept_new_host_keys="yes"), "true or false"),
    ],
)
def test_every_mistake_is_one_sentence(tmp_path: Path, change, says):
    data = three()
    change(data)
    with pytest.raises(ClusterError, match=says):
        parse_inventory(data, tmp_path)


def test_written_and_read_back_the_same(tmp_path: Path):
    inv = parse_inventory(three(port=2222, data_dir="/srv/kafka"), tmp_path)
    path = tmp_path / "hosts.yaml"
    path.write_text(dump_inventory(inv, tmp_path))
    again = load_inventory(path)
    assert again.hosts == inv.hosts
    assert again.known_hosts == inv.known_hosts
    assert yaml.safe_load(path.read_text())["hosts"][0]["key"] == "id"


def test_a_missing_file_names_itself(tmp_path: Path):
    with pytest.raises(ClusterError, match="cannot read the inventory"):
        load_inventory(tmp_path / "nope.yaml")


def test_fresh_keys_load_in_paramiko_and_make_known_hosts_lines(tmp_path: Path):
    pair = new_key("n1@test")
    (tmp_path / "k").write_bytes(pair.private)
    key = paramiko.Ed25519Key.from_private_key_file(str(tmp_path / "k"))
    assert pair.public.split()[1] == key.get_base64()
    assert new_key("x").public != pair.public
    line = known_hosts_line("10.0.0.5", 22, pair.public)
    (tmp_path / "kh").write_text(line + known_hosts_line("10.0.0.6", 2222, pair.public))
    known = paramiko.HostKeys(str(tmp_path / "kh"))
    assert known.lookup("10.0.0.5")["ssh-ed25519"] == key
    assert known.lookup("[10.0.0.6]:2222")["ssh-ed25519"] == key


def test_the_hosts_image_follows_the_node_image():
    assert image_tag("kchaos-node:a") == image_tag("kchaos-node:a")
    assert image_tag("kchaos-node:a") != image_tag("kchaos-node:b")
