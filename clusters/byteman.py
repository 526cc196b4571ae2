"""Byteman's rule listener, spoken from the harness: load, delete and list rules in a running JVM.

Every Kafka JVM starts with Byteman's agent (clusters/config.py), its listener bound to the
node's own address on the cluster network, so the harness host and the other nodes reach it and
nothing else does. The protocol is Byteman's own (its ``TransformListener``, which its ``Submit``
client speaks): one command per connection; the client writes a command line (``LOAD``,
``DELETE``, ``DELETEALL``, ``LIST``, ``VERSION``) and, for ``LOAD`` and ``DELETE``, scripts framed
by ``SCRIPT <name>`` / ``ENDSCRIPT`` and closed by ``ENDLOAD`` / ``ENDDELETE``; the agent answers
with lines, the last one ``OK``, and closes. A line starting ``ERROR`` or ``EXCEPTION`` reports a
failure. ``DELETE`` finds rules by their ``RULE <name>`` lines, so deleting needs only names.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clusters.errors import ClusterError

# Byteman's default listener port; Kafka's own ports are 9092 and 9093, Jolokia's 8778.
BYTEMAN_PORT = 9091
CONNECT_TIMEOUT_S = 3.0
# Loading a rule retransforms every loaded class it matches, which takes a moment on two cores.
ANSWER_TIMEOUT_S = 20.0
# What DELETE and DELETEALL answer when there is nothing (left) to delete: not a failure.
_NOTHING = ("ERROR No rule scripts to remove", "ERROR failed to find loaded rule with name")


class BytemanError(ClusterError):
    """The listener refused a request or did not answer; one sentence naming the node."""


class NoListener(BytemanError):
    """Nothing listens on the node's Byteman port: its JVM was started without the agent, or is
    not up (yet). A JVM without a listener holds no rules."""


@dataclass(frozen=True)
class Rule:
    """One Byteman rule: at ``location`` in ``target_class.method``, if ``condition``, ``action``.

    ``target_class`` is the binary name (``Outer$Inner``); ``method`` the name in the class file
    (Scala's private methods are mangled: ``kafka$server$X$$send``), optionally with a
    signature in parentheses.
    """

    name: str
    target_class: str
    method: str
    condition: str
    action: str
    location: str = "AT ENTRY"

    def text(self) -> str:
        for part in (self.name, self.target_class, self.method, self.condition, self.action):
            # The listener frames scripts by lines: a newline or an ENDRULE inside would end the
            # rule (or the script) early and load something else than this.
            if "\n" in part or "ENDRULE" in part or "ENDSCRIPT" in part:
                raise BytemanError(f"rule {self.name!r}: a rule part may not hold {part!r}")
        return (
            f"RULE {self.name}\n"
            f"CLASS {self.target_class}\n"
            f"METHOD {self.method}\n"
            f"{self.location}\n"
            f"IF {self.condition}\n"
            f"DO {self.action}\n"
            "ENDRULE\n"
        )


@dataclass(frozen=True)
class LoadedRule:
    """A rule as the agent lists it, with where it was injected and what happened there."""

    name: str
    target_class: str
    method: str
    # Each "internal/Class.method" the rule was injected into, in this JVM's loaded classes.
    injected: tuple[str, ...] = ()
    # Byteman type-checks and compiles a rule the first time it is triggered: "compiled
    # successfully" means it has been triggered at least once.
    triggered: bool = False
    errors: tuple[str, ...] = ()


def load_request(rules: Sequence[Rule], script: str = "kchaos") -> str:
    body = "".join(f"SCRIPT {script}/{r.name}\n{r.text()}ENDSCRIPT\n" for r in rules)
    return f"LOAD\n{body}ENDLOAD\n"


def delete_request(names: Iterable[str], script: str = "kchaos") -> str:
    body = "".join(f"SCRIPT {script}/{n}\nRULE {n}\nENDSCRIPT\n" for n in names)
    return f"DELETE\n{body}ENDDELETE\n"


def failures(lines: Sequence[str], tolerated: tuple[str, ...] = ()) -> list[str]:
    """The lines where the agent reports a failure (ERROR, EXCEPTION), less the tolerated."""
    return [
        ln for ln in lines if ln.startswith(("ERROR", "EXCEPTION")) and not ln.startswith(tolerated)
    ]


def named(lines: Sequence[str], verb: str) -> list[str]:
    """Rule names from the agent's lines ``<verb> <name>`` (``install rule``, ...)."""
    return [ln[len(verb) + 1 :].strip() for ln in lines if ln.startswith(verb + " ")]


_TRIGGER = re.compile(r"trigger (?:method|class): (.+)$")


def parse_list(lines: Sequence[str]) -> list[LoadedRule]:
    """The rules of a LIST answer: each ``RULE``..``ENDRULE`` block, then its transforms."""
    rules: list[LoadedRule] = []
    cur: dict | None = None
    in_rule = False

    def close() -> None:
        if cur is not None:
            rules.append(
                LoadedRule(
                    cur["name"],
                    cur["class"],
                    cur["method"],
                    tuple(cur["injected"]),
                    cur["triggered"],
                    tuple(cur["errors"]),
                )
            )

    for raw in lines:
        line = raw.strip()
        if line.startswith("RULE ") and not in_rule:
            close()
            cur = {
                "name": line[5:].strip(),
                "class": "",
                "method": "",
                "injected": [],
                "triggered": False,
                "errors": [],
            }
            in_rule = True
        elif cur is None:
            continue
        elif in_rule:
            if line == "ENDRULE":
                in_rule = False
            elif line.startswith(("CLASS ", "INTERFACE ")) and not cur["class"]:
                cur["class"] = line.split(" ", 1)[1].lstrip("^")
            elif line.startswith("METHOD ") and not cur["method"]:
                cur["method"] = line[7:].strip()
        elif m := _TRIGGER.match(line):
            cur["injected"].append(m.group(1))
        elif line == "compiled successfully":
            cur["triggered"] = True
        elif line == "failed to compile" or line.startswith("threw "):
            cur["errors"].append(line)
    close()
    return rules


class Listener:
    """A client of one JVM's Byteman listener."""

    def __init__(self, host: str, port: int = BYTEMAN_PORT, timeout: float = ANSWER_TIMEOUT_S):
        self.host = host
        self.port = port
        self.timeout = timeout

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def request(self, text: str) -> list[str]:
        """Sends one command and returns the answer's lines before its closing ``OK``."""
        try:
            sock = socket.create_connection((self.host, self.port), timeout=CONNECT_TIMEOUT_S)
        except ConnectionRefusedError:
            raise NoListener(
                f"no Byteman listener at {self.where}: the JVM there was started without the "
                "agent, or is not up"
            ) from None
        except OSError as exc:
            raise BytemanError(
                f"cannot reach the Byteman listener at {self.where}: {exc}"
            ) from None
        chunks: list[bytes] = []
        try:
            with sock:
                sock.settimeout(self.timeout)
                sock.sendall(text.encode())
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
        except TimeoutError:
            raise BytemanError(
                f"the Byteman listener at {self.where} did not answer {text.split()[0]} within "
                f"{self.timeout:g} s"
            ) from None
        except OSError as exc:
            raise BytemanError(f"the Byteman listener at {self.where} failed: {exc}") from None
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        if not lines or lines[-1].strip() != "OK":
            raise BytemanError(
                f"the Byteman listener at {self.where} closed before its answer to "
                f"{text.split()[0]} ended ({len(lines)} line(s))"
            )
        return [ln.rstrip() for ln in lines[:-1]]

    def _checked(self, text: str, tolerated: tuple[str, ...] = ()) -> list[str]:
        lines = self.request(text)
        bad = failures(lines, tolerated)
        if bad:
            raise BytemanError(
                f"the Byteman agent at {self.where} refused {text.split()[0]}: {bad[0]}"
            )
        return lines

    def load(self, rules: Sequence[Rule]) -> list[str]:
        """Loads (or redefines, by name) the rules; returns their names as the agent took them."""
        if not rules:
            return []
        lines = self._checked(load_request(rules))
        return named(lines, "install rule") + named(lines, "redefine rule")

    def delete(self, names: Iterable[str]) -> list[str]:
        """Unloads the named rules; a name not loaded is no failure. Returns those unloaded."""
        names = list(names)
        if not names:
            return []
        return named(self._checked(delete_request(names), _NOTHING), "uninstall RULE")

    def delete_all(self) -> list[str]:
        """Unloads every rule; returns their names (none: nothing was loaded)."""
        return named(self._checked("DELETEALL\n", _NOTHING), "uninstall RULE")

    def rules(self) -> list[LoadedRule]:
        return parse_list(self._checked("LIST\n"))

    def version(self) -> str:
        lines = self._checked("VERSION\n")
        return lines[0].strip() if lines else ""


class ListenerRules:
    """The ``Rules`` capability for a node handle whose JVM runs Byteman's listener at ``ip``."""

    ip: str
    rules_port: int = BYTEMAN_PORT

    def _listener(self) -> Listener:
        return Listener(self.ip, self.rules_port)

    def load_rules(self, rules: Sequence[Rule]) -> list[str]:
        return self._listener().load(rules)

    def delete_rules(self, names: Iterable[str]) -> list[str]:
        return self._listener().delete(names)

    def delete_all_rules(self) -> list[str]:
        return self._listener().delete_all()

    def loaded_rules(self) -> list[LoadedRule]:
        return self._listener().rules()
