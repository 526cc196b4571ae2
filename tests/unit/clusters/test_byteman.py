"""The Byteman listener client against a fake TCP server: framing only (what is sent, how answers
end), and the LIST answer parsed from the shape Byteman's own listener writes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from clusters.byteman import (
    BytemanError,
    Listener,
    ListenerRules,
    NoListener,
    Rule,
    parse_list,
)
from clusters.capabilities import Rules

RULE = Rule(
    "kchaos slow-disk 0000002a append",
    "org.apache.kafka.common.record.FileRecords",
    "append",
    "System.currentTimeMillis() < 1700000000000L",
    "delay(50L)",
)


class FakeListener:
    """Accepts connections, reads one request (until the client's last framing line) and answers
    with ``answer(request)``, closing as Byteman's listener does."""

    ENDS = ("ENDLOAD\n", "ENDDELETE\n")

    def __init__(self, answer: Callable[[str], str]):
        self.answer = answer
        self.requests: list[str] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while True:
                    data += conn.recv(4096)
                    text = data.decode()
                    first = text.split("\n", 1)[0]
                    if first in ("LOAD", "DELETE"):
                        if text.endswith(self.ENDS):
                            break
                    elif text.endswith("\n"):
                        break
                self.requests.append(text)
                conn.sendall(self.answer(text).encode())

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def fake() -> Iterator[Callable[[Callable[[str], str]], FakeListener]]:
    made: list[FakeListener] = []

    def make(answer: Callable[[str], str]) -> FakeListener:
        made.append(FakeListener(answer))
        return made[-1]

    yield make
    for f in made:
        f.close()


def test_a_rule_renders_as_byteman_script_text():
    assert RULE.text() == (
        "RULE kchaos slow-disk 0000002a append\n"
        "CLASS org.apache.kafka.common.record.FileRecords\n"
        "METHOD append\n"
        "AT ENTRY\n"
        "IF System.currentTimeMillis() < 1700000000000L\n"
        "DO delay(50L)\n"
        "ENDRULE\n"
    )


def test_a_rule_part_that_would_break_the_framing_is_refused():
    with pytest.raises(BytemanError, match="may not hold"):
        Rule("x\nENDSCRIPT", "C", "m", "TRUE", "delay(1L)").text()
    with pytest.raises(BytemanError, match="may not hold"):
        Rule("x", "C", "m", "TRUE", "ENDRULE").text()


def test_load_frames_each_rule_as_a_script_and_reads_the_installed_names(fake):
    srv = fake(lambda req: "install rule kchaos slow-disk 0000002a append\nOK\n")
    got = Listener("127.0.0.1", srv.port).load([RULE])
    assert got == ["kchaos slow-disk 0000002a append"]
    assert srv.requests == [
        "LOAD\nSCRIPT kchaos/kchaos slow-disk 0000002a append\n" + RULE.text() + "ENDSCRIPT\n"
        "ENDLOAD\n"
    ]


def test_a_redefined_rule_counts_as_loaded(fake):
    srv = fake(lambda req: "redefine rule kchaos slow-disk 0000002a append\nOK\n")
    assert Listener("127.0.0.1", srv.port).load([RULE]) == [RULE.name]


def test_an_agent_exception_is_an_error_naming_its_first_line(fake):
    answer = (
        "EXCEPTION org.jboss.byteman.rule.exception.ParseException: rule x\n"
        "\tat org.jboss.byteman.rule.Rule.<init>(Rule.java:245)\nOK\n"
    )
    srv = fake(lambda req: answer)
    with pytest.raises(BytemanError, match=r"refused LOAD: EXCEPTION .*ParseException: rule x"):
        Listener("127.0.0.1", srv.port).load([RULE])


def test_delete_sends_only_rule_names_and_tolerates_names_not_loaded(fake):
    srv = fake(
        lambda req: "ERROR failed to find loaded rule with name gone\nuninstall RULE kchaos a\nOK\n"
    )
    assert Listener("127.0.0.1", srv.port).delete(["gone", "kchaos a"]) == ["kchaos a"]
    assert srv.requests == [
        "DELETE\nSCRIPT kchaos/gone\nRULE gone\nENDSCRIPT\n"
        "SCRIPT kchaos/kchaos a\nRULE kchaos a\nENDSCRIPT\nENDDELETE\n"
    ]


def test_delete_all_with_nothing_loaded_is_no_failure(fake):
    srv = fake(lambda req: "ERROR No rule scripts to remove\nOK\n")
    assert Listener("127.0.0.1", srv.port).delete_all() == []
    assert srv.requests == ["DELETEALL\n"]


def test_an_answer_cut_short_is_an_error(fake):
    srv = fake(lambda req: "install rule x\n")
    with pytest.raises(BytemanError, match="closed before its answer to LOAD ended"):
        Listener("127.0.0.1", srv.port).load([RULE])


def test_a_port_nobody_listens_on_is_no_listener():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(NoListener, match="started without the agent"):
        Listener("127.0.0.1", port).rules()


def test_a_listener_that_never_answers_times_out():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
        with pytest.raises(BytemanError, match=r"did not answer LIST within 0\.2 s"):
            Listener("127.0.0.1", port, timeout=0.2).rules()


# The shape Byteman's listener writes for LIST (RuleScript.writeTo, then Transform.writeTo).
LISTED = """# File kchaos/kchaos controller-stall 0000002a write-event line 1
RULE kchaos controller-stall 0000002a write-event
CLASS org.apache.kafka.controller.QuorumController$ControllerWriteEvent
METHOD run
NOCOMPILE
AT ENTRY
IF System.currentTimeMillis() < 1700000000000L
DO delay(Math.max(1L, 1700000000000L - System.currentTimeMillis()))
ENDRULE
Transformed in:
loader: jdk.internal.loader.ClassLoaders$AppClassLoader@5a07e868
trigger method: org.apache.kafka.controller.QuorumController$ControllerWriteEvent.run() void
compiled successfully
# File kchaos/kchaos controller-stall 0000002a read-event line 1
RULE kchaos controller-stall 0000002a read-event
CLASS org.apache.kafka.controller.QuorumController$ControllerReadEvent
METHOD run
NOCOMPILE
AT ENTRY
IF TRUE
DO delay(1L)
ENDRULE
# File kchaos/bad line 1
RULE bad
CLASS ^a.B
METHOD m
NOCOMPILE
AT ENTRY
IF TRUE
DO nothing()
ENDRULE
Transformed in:
loader: jdk.internal.loader.ClassLoaders$AppClassLoader@5a07e868
trigger method: a.B.m() void
failed to compile
"""


def test_list_parses_each_rule_where_it_was_injected_and_whether_it_fired(fake):
    srv = fake(lambda req: LISTED + "OK\n")
    rules = Listener("127.0.0.1", srv.port).rules()
    assert [(r.name, r.target_class, r.method, r.triggered) for r in rules] == [
        (
            "kchaos controller-stall 0000002a write-event",
            "org.apache.kafka.controller.QuorumController$ControllerWriteEvent",
            "run",
            True,
        ),
        (
            "kchaos controller-stall 0000002a read-event",
            "org.apache.kafka.controller.QuorumController$ControllerReadEvent",
            "run",
            False,
        ),
        ("bad", "a.B", "m", False),
    ]
    assert rules[0].injected == (
        "org.apache.kafka.controller.QuorumController$ControllerWriteEvent.run() void",
    )
    assert rules[1].injected == ()  # its class is not loaded yet: injected when it is
    assert rules[2].errors == ("failed to compile",)


def test_an_empty_list_says_so():
    assert parse_list(["no rules installed"]) == []


def test_a_node_handle_with_an_address_has_the_rules_capability(fake):
    srv = fake(lambda req: "no rules installed\nOK\n")

    class Handle(ListenerRules):
        spec = None
        name = "n1"
        ip = "127.0.0.1"
        rules_port = srv.port

    node = Handle()
    assert isinstance(node, Rules)
    assert node.loaded_rules() == []
