"""Our own iptables chains inside a node's network namespace, replaced and removed whole.

Each package owns one chain jumped to from INPUT. A chain is written with one
``iptables-restore --noflush``, which replaces its rules atomically (moving from one partition
to another never passes through full connectivity), and removing it deletes only the chain and
its jump, never the node's other rules.
"""

from __future__ import annotations

from clusters.capabilities import Exec, Shell
from nemesis.nodes import run


def restore_text(chain: str, rules: list[str]) -> str:
    # Declaring the chain under --noflush empties it first: the new set replaces the old at once.
    return "\n".join(["*filter", f":{chain} - [0:0]", *rules, "COMMIT", ""])


def install_chain(node: Shell, chain: str, rules: list[str]) -> list[str]:
    path = f"/tmp/{chain.lower()}.rules"
    node.put_file(path, restore_text(chain, rules))
    run(node, ["iptables-restore", "--noflush", path])
    if not node.exec(["iptables", "-C", "INPUT", "-j", chain]).ok:
        run(node, ["iptables", "-I", "INPUT", "1", "-j", chain])
    return rules


def remove_chain(node: Exec, chain: str) -> int:
    """Deletes the chain and every jump to it; returns how many rules it held."""
    listed = node.exec(["iptables", "-S", chain])
    if not listed.ok:
        return 0  # no chain: nothing of ours here
    rules = sum(1 for line in listed.stdout.splitlines() if line.startswith("-A"))
    while node.exec(["iptables", "-D", "INPUT", "-j", chain]).ok:
        pass
    run(node, ["iptables", "-F", chain])
    run(node, ["iptables", "-X", chain])
    return rules


def dropped(node: Exec, chain: str) -> int:
    """Packets the chain's rules have dropped so far (0 when the chain is absent)."""
    listed = node.exec(["iptables", "-L", chain, "-n", "-v", "-x"])
    total = 0
    for line in listed.stdout.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "DROP" and fields[0].isdigit():
            total += int(fields[0])
    return total
