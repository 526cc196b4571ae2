"""A node handle that keeps iptables state and a process state in memory, for Docker-free tests."""

from __future__ import annotations

import json

from clusters.capabilities import ExecResult
from clusters.topology import NodeSpec


class FakeNode:
    def __init__(self, spec: NodeSpec):
        self.spec = spec
        self.files: dict[str, str] = {}
        self.chains: dict[str, list[str]] = {}
        self.input_jumps: list[str] = []
        self.running = True
        self.stopped = False
        self.commands: list[list[str]] = []
        self.environ: list[str] = []
        self.restarts = 0
        self.netem = True  # False: a kernel without CONFIG_NET_SCH_NETEM
        self.qdisc: list[str] = []
        # The disk layer's state (clusters/disk_layer.py) when the node runs on it: whether it
        # has power, each file's bytes no fsync made durable (``pending``), and optionally
        # ``files`` (path under the mountpoint -> bytearray, what the backing directory holds),
        # ``failing`` (fail rules), ``snapshots``, and ``batches``, what `kchaos-disk batches`
        # answers of a segment (path -> its entry).
        self.disk: dict | None = None
        # The process's output, one line a list item (Logs.logs); kept across restarts.
        self.log_lines: list[str] = []

    name = property(lambda self: self.spec.name)
    ip = property(lambda self: self.spec.ip)

    def put_file(self, path: str, content: bytes | str, mode: int = 0o644) -> None:
        self.files[path] = content if isinstance(content, str) else content.decode()

    def exec(self, cmd: list[str], timeout: float | None = None) -> ExecResult:
        assert self.running, f"exec in stopped node {self.name}"
        self.commands.append(cmd)
        ok, fail = ExecResult(0, "", ""), ExecResult(1, "", "no such chain")
        match cmd:
            case ["iptables-restore", "--noflush", path]:
                lines = self.files[path].splitlines()
                chain = next(x[1:].split()[0] for x in lines if x.startswith(":"))
                self.chains[chain] = [x for x in lines if x.startswith("-A")]
                return ok
            case ["iptables", "-C", "INPUT", "-j", chain]:
                return ok if chain in self.input_jumps else fail
            case ["iptables", "-I", "INPUT", "1", "-j", chain]:
                self.input_jumps.insert(0, chain)
                return ok
            case ["iptables", "-D", "INPUT", "-j", chain]:
                if chain not in self.input_jumps:
                    return fail
                self.input_jumps.remove(chain)
                return ok
            case ["iptables", "-S", chain]:
                if chain not in self.chains:
                    return fail
                return ExecResult(0, "\n".join([f"-N {chain}", *self.chains[chain]]), "")
            case ["iptables", "-F", chain]:
                self.chains[chain] = []
                return ok
            case ["iptables", "-X", chain]:
                assert chain not in self.input_jumps, "deleting a chain still jumped to"
                del self.chains[chain]
                return ok
            case ["iptables", "-S"]:
                out = [f"-N {c}" for c in self.chains] + [
                    f"-A INPUT -j {c}" for c in self.input_jumps
                ]
                return ExecResult(0, "\n".join(out), "")
            case ["cat", "/proc/1/environ"]:
                return ExecResult(0, "\0".join(self.environ), "")
            case ["cat", path] | ["test", "-f", path]:
                return ok if path in self.files else fail
            case ["mv", "-f", src, dst]:
                self.files[dst] = self.files.pop(src)
                return ok
            case ["rm", "-f", *paths]:
                for path in paths:
                    self.files.pop(path, None)
                return ok
            case ["tc", "qdisc", "replace", "dev", _, "root", "netem", *args]:
                if not self.netem:
                    return ExecResult(2, "", "Error: Specified qdisc kind is unknown.\n")
                self.qdisc = ["netem", *args]
                return ok
            case ["tc", "qdisc", "show", *_]:
                if self.qdisc:
                    return ExecResult(0, f"qdisc {' '.join(self.qdisc)} 8001: root\n", "")
                return ExecResult(0, "qdisc noqueue 0: root refcnt 2\n", "")
            case ["tc", "qdisc", "del", *_]:
                self.qdisc = []
                return ok
            case [program, "ctl", "--control", _, *words] if program.endswith("/kchaos-disk"):
                return self._disk(words)
            case [program, "batches", "--root", _, *pairs] if program.endswith("/kchaos-disk"):
                known = (self.disk or {}).get("batches", {})
                lose = (self.disk or {}).get("lose_answers", {})
                if lose.get("batches"):  # read, and its output lost
                    lose["batches"] -= 1
                    return ExecResult(0, "", "")
                walked = [
                    {"path": p, "from": int(f), **known.get(p, {"error": "No such file"})}
                    for p, f in zip(pairs[::2], pairs[1::2], strict=True)
                ]
                return ExecResult(0, json.dumps({"ok": True, "files": walked}), "")
            case ["find", _root, "-type", "f", "-printf", _]:
                files = (self.disk or {}).get("files", {})
                lines = [f"{p}\t{len(b)}\t{(len(b) + 511) // 512}" for p, b in files.items()]
                return ExecResult(0, "".join(f"{line}\n" for line in lines), "")
            case ["sync", _]:
                return ok
            case ["od", "-An", "-tu1", "-j", offset, "-N", "1", path]:
                data = (self.disk or {}).get("files", {})[path.split("/root/", 1)[1]]
                return ExecResult(0, f"  {data[int(offset)]}\n", "")
            case ["cmp", "-s", a, b]:
                disk = self.disk or {}
                now = disk.get("files", {}).get(a.split("/root/", 1)[1])
                copy = disk.get("snapshots", {}).get(b.rsplit("/", 1)[1])
                return ok if now == copy else ExecResult(1, "", "")
        raise AssertionError(f"unexpected command {cmd}")

    def _disk(self, words: list[str]) -> ExecResult:
        """The layer's control command: its one JSON line, as kchaos-disk prints it."""
        if self.disk is None:
            line = {"ok": False, "error": "no disk layer answers on /run/kchaos-disk.sock"}
            return ExecResult(2, json.dumps(line), "")
        pending: dict[str, int] = self.disk["pending"]
        files = [{"path": p, "bytes": b, "written": b} for p, b in sorted(pending.items())]
        match words:
            case ["ping"]:
                line = {"ok": True}
            case ["status"]:
                # Nothing of a pending file is durable here: it was never fsynced.
                listed = [{**f, "size": f["bytes"], "durable_size": 0} for f in files]
                line = {
                    "ok": True,
                    "powered": self.disk["powered"],
                    "files": listed,
                    "failing": self.disk.get("failing", []),
                }
            case ["drop"] if self.disk["powered"]:
                self.disk = {**self.disk, "powered": False, "pending": {}}
                total = sum(pending.values())
                line = {
                    "ok": True,
                    "files": [{**f, "size_after": 0} for f in files],
                    "dropped_bytes": total,
                    "dropped_written": total,
                    "names": [],
                    "errors": 0,
                }
            case _:
                line = self._medium(words)
        # The command ran and its output was lost, `lose_answers[verb]` more times.
        lose = self.disk.get("lose_answers", {})
        if lose.get(words[0]):
            lose[words[0]] -= 1
            return ExecResult(0, "", "")
        return ExecResult(0 if line["ok"] else 1, json.dumps(line), "")

    def _medium(self, words: list[str]) -> dict:
        """Fail rules, corruption, snapshots and rollbacks, as the layer answers them."""
        assert self.disk is not None
        files: dict[str, bytearray] = self.disk.setdefault("files", {})
        failing: list[dict] = self.disk.setdefault("failing", [])
        snapshots: dict[str, bytearray] = self.disk.setdefault("snapshots", {})
        match words:
            case ["fail", classes, errno, *prefix]:
                failing.append({"classes": classes, "errno": errno, "prefix": "".join(prefix)})
                return {"ok": True, "failing": failing}
            case ["heal"]:
                cleared, failing[:] = len(failing), []
                return {"ok": True, "cleared": cleared}
            case ["corrupt", "flip", path, offset, mask] if path in files:
                before = files[path][int(offset)]
                files[path][int(offset)] ^= int(mask)
                return {"ok": True, "before": before, "after": files[path][int(offset)]}
            case ["corrupt", "truncate", path, size] if path in files:
                before = len(files[path])
                del files[path][int(size) :]
                return {"ok": True, "size_before": before, "size_after": int(size)}
            case ["snapshot", path, name] if path in files:
                snapshots[name] = bytearray(files[path])
                return {"ok": True, "size": len(files[path])}
            case ["rollback", path, name] if path in files and name in snapshots:
                before = len(files[path])
                files[path] = bytearray(snapshots[name])
                return {"ok": True, "size_before": before, "size_after": len(files[path])}
        return {"ok": False, "error": f"cannot {' '.join(words)}"}

    def logs(self, tail: int | None = None) -> str:
        return "\n".join(self.log_lines[-tail:] if tail else self.log_lines)

    def is_running(self) -> bool:
        return self.running

    def kill(self) -> None:
        self.running = False

    def start(self) -> None:
        # A restarted container gets a fresh network namespace: no rules survive. The entrypoint
        # sources the faketime env file, if there is one, into the JVM's environment.
        self.running, self.stopped, self.chains, self.input_jumps = True, False, {}, []
        if self.disk is not None:
            # Mounted again on what was kept: no fail rule, nothing pending.
            kept = {k: self.disk[k] for k in ("files", "snapshots") if k in self.disk}
            self.disk = {"powered": True, "pending": {}, **kept}
        env = self.files.get("/etc/kafka/faketime.env", "")
        self.environ = [line.removeprefix("export ") for line in env.splitlines()]
        self.restarts += 1
        self.log_lines.append(
            f"[2026-01-01 00:00:00,000] INFO [KafkaRaftServer nodeId={self.spec.node_id}] "
            "Kafka Server started (kafka.server.KafkaRaftServer)"
        )

    def stop(self, timeout: float = 30) -> None:
        self.running = False

    def pause(self) -> None:
        self.stopped = True

    def resume(self) -> None:
        self.stopped = False

    def is_paused_by_signal(self) -> bool:
        return self.running and self.stopped
