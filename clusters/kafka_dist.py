"""Kafka distributions assembled from Maven Central jars (no tarball, no registry).

A distribution is a directory of jars plus ``dist.json``, which records the resolved version, the
release line's traits and the main class of every tool kchaos runs. Class names moved between
release lines (``kafka.admin.FeatureCommand`` became ``org.apache.kafka.tools.FeatureCommand``),
so they are discovered in the jars rather than written down per version.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
import uuid
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from xml.etree import ElementTree

import requests

from clusters.cache import cache_dir
from clusters.errors import ClusterError
from history import strict_json

# A run or cluster that names no version gets the newest line kchaos runs for its topology:
# Kafka 4.x for KRaft, and 3.9 for ZooKeeper and the migration, since Kafka 4.0 removed ZooKeeper
# mode (KIP-500's end). DEFAULT_VERSION is what a stored plan without a version meant.
NEWEST_LINE = "4.4"
NEWEST_ZK_LINE = "3.9"
DEFAULT_VERSION = NEWEST_ZK_LINE
# What `kchaos setup` assembles when given no --version: both of the lines above.
SETUP_VERSIONS = (NEWEST_ZK_LINE, NEWEST_LINE)
_ZK_KINDS = ("zk", "migration")


def newest_line(topology: str) -> str:
    """The default Kafka line of a new cluster of ``topology`` (a kind of clusters/topology.py)."""
    return NEWEST_ZK_LINE if topology in _ZK_KINDS else NEWEST_LINE


MAVEN_REPO = os.environ.get("KCHAOS_MAVEN_REPO", "https://repo.maven.apache.org/maven2")
JOLOKIA = "org.jolokia:jolokia-agent-jvm:2.6.0:jar:javaagent"
JOLOKIA_JAR = "jolokia-agent-jvm-2.6.0-javaagent.jar"
# Byteman's agent injects the jvm package's faults into named Kafka methods (nemesis/jvm.py);
# one jar: its ASM is repackaged under org.jboss.byteman, so it cannot clash with Kafka's jars.
BYTEMAN = "org.jboss.byteman:byteman:4.0.27"
BYTEMAN_JAR = "byteman-4.0.27.jar"
# Kafka 4 logs through log4j2 but ships no slf4j binding as a library dependency.
LOG4J2_VERSION = "2.25.4"
RELOAD4J_BINDING = "org.slf4j:slf4j-reload4j:1.7.36"
OLDEST_SUPPORTED = (3, 3)  # KRaft became production-ready in 3.3 (KIP-833).
METADATA_TTL_S = 24 * 3600

# Candidate main classes per tool, newest location first.
TOOL_CLASSES: dict[str, tuple[str, ...]] = {
    "kafka": ("kafka.Kafka",),
    "storage": ("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool"),
    "metadata_quorum": (
        "org.apache.kafka.tools.MetadataQuorumCommand",
        "kafka.admin.MetadataQuorumCommand",
    ),
    "features": ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
    "dump_log": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "metadata_shell": ("org.apache.kafka.shell.MetadataShell",),
    "zookeeper": ("org.apache.zookeeper.server.quorum.QuorumPeerMain",),
    "zookeeper_shell": ("org.apache.zookeeper.ZooKeeperMain",),
}
# The metadata shell is discovered when its jar is there, but nothing kchaos runs needs it.
REQUIRED_TOOLS = ("kafka", "storage", "metadata_quorum", "features", "dump_log")
REQUIRED_ARTIFACTS = ("kafka_2.13", "kafka-tools")
# Not every release publishes these (4.4.0 has no kafka-shell on Maven Central): each goes into
# the pom only when its version is published, and a release without it is still assembled.
OPTIONAL_ARTIFACTS = ("kafka-shell",)


@dataclass(frozen=True)
class ReleaseLine:
    """What a Kafka release line can do, as far as kchaos cares."""

    major: int
    minor: int

    @property
    def zookeeper(self) -> bool:
        return self.major < 4  # Kafka 4.0 removed ZooKeeper mode (KIP-500's end state).

    @property
    def migration(self) -> bool:
        return self.zookeeper and (self.major, self.minor) >= (3, 4)  # KIP-866 arrived in 3.4.

    @property
    def logging(self) -> str:
        return "reload4j" if self.major < 4 else "log4j2"


@dataclass(frozen=True)
class KafkaDist:
    """A Kafka distribution ready to mount into nodes."""

    version: str
    home: Path
    classes: dict[str, str]

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def line(self) -> ReleaseLine:
        return parse_line(self.version)

    def host_classpath(self) -> str:
        return str(self.libs / "*")


def parse_version(text: str) -> tuple[int, ...]:
    # ASCII digits without leading zeros (\d would take any script's digits, e.g. "３.９").
    if not isinstance(text, str) or not re.fullmatch(
        r"(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*)){0,2}", text
    ):
        raise ClusterError(
            f"{text!r} is not a Kafka version: give a release such as 3.9.2, or a line such as 3.9"
        )
    return tuple(int(p) for p in text.split("."))


def parse_line(version: str) -> ReleaseLine:
    parts = parse_version(version)
    return ReleaseLine(parts[0], parts[1] if len(parts) > 1 else 0)


def resolve_version(requested: str, available: list[str]) -> str:
    """Turns ``3.9`` into the newest published 3.9.x; checks that an exact version exists."""
    wanted = parse_version(requested)
    too_old = wanted[0] < OLDEST_SUPPORTED[0] or (len(wanted) > 1 and wanted[:2] < OLDEST_SUPPORTED)
    if too_old:
        raise ClusterError(
            f"Kafka {requested} is older than kchaos supports: KRaft is production-ready from "
            f"{'.'.join(map(str, OLDEST_SUPPORTED))} on; choose 3.3 or newer"
        )
    releases = sorted(
        (
            tuple(int(p) for p in v.split("."))
            for v in available
            if re.fullmatch(r"\d+\.\d+\.\d+", v)
        ),
    )
    matching = [r for r in releases if r[: len(wanted)] == wanted]
    if not matching:
        same_line = [r for r in releases if r[:2] == wanted[:2]] or [
            r for r in releases if r >= (*OLDEST_SUPPORTED, 0)
        ]
        known = ", ".join(".".join(map(str, r)) for r in same_line[-12:])
        raise ClusterError(f"unknown Kafka version {requested}: Maven Central has {known}")
    return ".".join(map(str, matching[-1]))


def published_versions(refresh: bool = False) -> list[str]:
    """Kafka releases listed on Maven Central, cached for a day so repeated runs work offline."""
    cached = cache_dir() / "kafka" / "maven-metadata.xml"
    fresh = cached.exists() and time.time() - cached.stat().st_mtime < METADATA_TTL_S
    if refresh or not fresh:
        url = f"{MAVEN_REPO}/org/apache/kafka/kafka_2.13/maven-metadata.xml"
        try:
            response = requests.get(url, timeout=20)
            response.raise_for_status()
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_bytes(response.content)
        except requests.RequestException as exc:
            if not cached.exists():
                raise ClusterError(f"Maven Central is not reachable ({url}): {exc}") from None
    root = ElementTree.fromstring(cached.read_bytes())
    return [v.text or "" for v in root.iter("version")]


def artifact_published(artifact: str, version: str) -> bool:
    url = f"{MAVEN_REPO}/org/apache/kafka/{artifact}/{version}/{artifact}-{version}.pom"
    try:
        return requests.head(url, timeout=20).status_code == 200
    except requests.RequestException:
        return True  # Can't tell; let Maven give the real error.


def dist_home(version: str) -> Path:
    return cache_dir() / "kafka" / version


def load_dist(version: str) -> KafkaDist | None:
    """The cached distribution for an exact version, or None if it was never fully assembled."""
    manifest = dist_home(version) / "dist.json"
    if not manifest.exists():
        return None
    data = json.loads(manifest.read_text())
    return KafkaDist(version=data["version"], home=dist_home(version), classes=data["classes"])


def cached_versions() -> list[str]:
    root = cache_dir() / "kafka"
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "dist.json").exists())


def resolve_offline_first(requested: str) -> str:
    """Resolves a version, preferring what is cached so that a warm machine needs no network."""
    if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", requested) and load_dist(requested):
        return requested
    try:
        available = published_versions()
    except ClusterError:
        cached = cached_versions()
        if not cached:
            raise
        return resolve_version(requested, cached)
    resolved = resolve_version(requested, available)
    if load_dist(resolved) or maven_reachable(resolved):
        return resolved
    # The list may name a release this host never fetched (a newer one, published since): with
    # Maven Central out of reach, a line means the newest release of it that is cached.
    wanted = parse_version(requested)
    cached = [v for v in cached_versions() if parse_version(v)[: len(wanted)] == wanted]
    if not cached:
        raise ClusterError(
            f"Kafka {resolved} is not in this host's cache and Maven Central is not reachable "
            f"({MAVEN_REPO}); cached: {', '.join(cached_versions()) or 'none'}"
        )
    return resolve_version(requested, cached)


def maven_reachable(version: str) -> bool:
    """Whether Maven Central answers at all (about kafka_2.13 of ``version``)."""
    url = f"{MAVEN_REPO}/org/apache/kafka/kafka_2.13/{version}/kafka_2.13-{version}.pom"
    try:
        requests.head(url, timeout=10)
    except requests.RequestException:
        return False
    return True


def _pom(version: str, optional: tuple[str, ...] = OPTIONAL_ARTIFACTS) -> str:
    """The pom whose runtime dependencies are the release's jars; ``optional`` names the
    OPTIONAL_ARTIFACTS this release publishes."""
    line = parse_line(version)
    deps = [
        ("org.apache.kafka", "kafka_2.13", version, ""),
        (
            "org.apache.kafka",
            "kafka-tools",
            version,
            _exclude("org.apache.kafka", "connect-runtime"),
        ),
    ]
    deps += [("org.apache.kafka", a, version, "") for a in OPTIONAL_ARTIFACTS if a in optional]
    if line.logging == "reload4j":
        g, a, v = RELOAD4J_BINDING.split(":")
        deps.append((g, a, v, ""))
    else:
        deps.append(("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J2_VERSION, ""))
        deps.append(("org.apache.logging.log4j", "log4j-core", LOG4J2_VERSION, ""))
    body = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version>{extra}</dependency>"
        for g, a, v, extra in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kchaos</groupId><artifactId>kafka-dist</artifactId><version>1</version>"
        f"<packaging>pom</packaging><dependencies>{body}</dependencies></project>"
    )


def _exclude(group: str, artifact: str) -> str:
    return (
        f"<exclusions><exclusion><groupId>{group}</groupId>"
        f"<artifactId>{artifact}</artifactId></exclusion></exclusions>"
    )


def _mvn(args: list[str], cwd: Path, what: str) -> None:
    if shutil.which("mvn") is None:
        raise ClusterError("Maven (mvn) is not installed: run the setup command from the README")
    local_repo = os.environ.get("KCHAOS_MAVEN_LOCAL_REPO")  # lets a benchmark start truly cold
    extra = [f"-Dmaven.repo.local={local_repo}"] if local_repo else []
    result = subprocess.run(
        ["mvn", "-B", "-q", *extra, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        errors = [ln for ln in result.stdout.splitlines() if "[ERROR]" in ln][:3]
        detail = " ".join(errors) or result.stderr.strip()[-500:]
        raise ClusterError(f"could not fetch {what} from Maven Central: {detail}")


def discover_classes(libs: Path) -> dict[str, str]:
    present: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as zf:
            present.update(n[:-6].replace("/", ".") for n in zf.namelist() if n.endswith(".class"))
    found = {}
    for tool, candidates in TOOL_CLASSES.items():
        for cls in candidates:
            if cls in present:
                found[tool] = cls
                break
    return found


def assemble(version: str) -> KafkaDist:
    """Fetches an exact Kafka version's jars into the cache (idempotent) and describes them."""
    existing = load_dist(version)
    if existing:
        return existing
    with _assembling(version):
        # Another process (a parallel test worker, a campaign cell) may have assembled it while
        # this one waited: its staging directory is the same, so only one may build at a time.
        return load_dist(version) or _assemble(version)


@contextlib.contextmanager
def _assembling(version: str):
    lock = dist_home(version).with_name(f".{version}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _assemble(version: str) -> KafkaDist:
    missing = [a for a in REQUIRED_ARTIFACTS if not artifact_published(a, version)]
    if missing:
        raise ClusterError(
            f"Kafka {version} is listed on Maven Central but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not published there; choose another version"
        )
    home = dist_home(version)
    home.mkdir(parents=True, exist_ok=True)
    optional = tuple(a for a in OPTIONAL_ARTIFACTS if artifact_published(a, version))
    (home / "pom.xml").write_text(_pom(version, optional))
    staging = home / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    _mvn(
        ["dependency:copy-dependencies", f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        home,
        f"Kafka {version}",
    )
    classes = discover_classes(staging)
    absent = [t for t in REQUIRED_TOOLS if t not in classes]
    if parse_line(version).zookeeper and "zookeeper" not in classes:
        absent.append("zookeeper")
    if absent:
        raise ClusterError(f"Kafka {version} from Maven Central lacks tools kchaos needs: {absent}")
    shutil.rmtree(home / "libs", ignore_errors=True)
    staging.rename(home / "libs")
    dist = KafkaDist(version=version, home=home, classes=classes)
    manifest = {"version": version, "classes": classes, "line": asdict(dist.line)}
    (home / "dist.json").write_text(strict_json.dumps(manifest, indent=2))
    return dist


def agents_dir() -> Path:
    return cache_dir() / "agents"


def _ensure_agent(artifact: str, jar: str, what: str) -> Path:
    target = agents_dir() / jar
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _mvn(
        ["dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={target.parent}"],
        target.parent,
        what,
    )
    return target


def ensure_jolokia() -> Path:
    """The Jolokia JVM agent that gives the harness JMX over HTTP on every node."""
    return _ensure_agent(JOLOKIA, JOLOKIA_JAR, "the Jolokia JMX agent")


def ensure_byteman() -> Path:
    """Byteman's agent, which every Kafka JVM starts with (clusters/config.py): a JVM whose
    ``-javaagent`` jar is missing does not start at all, so every node start needs it here."""
    return _ensure_agent(BYTEMAN, BYTEMAN_JAR, "the Byteman agent")


def ensure_agents() -> list[Path]:
    """Every JVM agent the nodes are started with, fetched once (idempotent)."""
    return [ensure_jolokia(), ensure_byteman()]


def ensure_dist(requested: str = DEFAULT_VERSION) -> KafkaDist:
    """Resolves and assembles a Kafka version plus the agents every node runs."""
    ensure_agents()
    return assemble(resolve_offline_first(requested))


# Asks the version's own jars for its newest production metadata.version, by reflection because
# the name moved (3.3 has ``latest()``, 3.7 on ``LATEST_PRODUCTION``, 4.x ``latestProduction()``).
_MV_PROBE = """
import java.lang.reflect.*;
public class MvProbe {
  public static void main(String[] a) throws Exception {
    Class<?> c = Class.forName("org.apache.kafka.server.common.MetadataVersion");
    Object mv = null;
    try { mv = c.getField("LATEST_PRODUCTION").get(null); } catch (NoSuchFieldException e) {}
    if (mv == null) {
      for (String m : new String[] {"latestProduction", "latest"}) {
        try { mv = c.getMethod(m).invoke(null); break; } catch (NoSuchMethodException e) {}
      }
    }
    System.out.println(c.getMethod("featureLevel").invoke(mv) + " " + mv);
  }
}
"""


def metadata_version_level(dist: KafkaDist) -> tuple[int, str]:
    """The newest production metadata.version of a release (its level and name, e.g.
    ``(21, "3.9-IV0")``): what a safe downgrade to that release lowers the cluster to (KIP-778).
    Asked of the release's own jars once and kept in its dist.json."""
    manifest = dist.home / "dist.json"
    data = json.loads(manifest.read_text()) if manifest.exists() else {}
    known = data.get("metadata_version")
    if known:
        return int(known[0]), str(known[1])
    if shutil.which("java") is None:
        raise ClusterError("java is not installed: run the setup command from the README")
    probe = dist.home / "MvProbe.java"
    probe.write_text(_MV_PROBE)
    result = subprocess.run(
        ["java", "-cp", dist.host_classpath(), str(probe)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    words = result.stdout.split()
    if result.returncode != 0 or len(words) != 2 or not words[0].isdigit():
        detail = (result.stderr.strip() or result.stdout.strip())[-300:]
        raise ClusterError(f"could not read Kafka {dist.version}'s metadata.version: {detail}")
    level, name = int(words[0]), words[1]
    if data:
        data["metadata_version"] = [level, name]
        manifest.write_text(strict_json.dumps(data, indent=2))
    return level, name


# Logging off for Kafka's tools run on the host. An empty file does not do it for log4j2 (4.x):
# it reports the file it cannot parse with a stack trace on stderr, which then crowded out what
# the tool said in a step's recorded output.
_QUIET_LOGGING = {
    "log4j.configuration": ("quiet-log4j.properties", "log4j.rootLogger=OFF\n"),
    "log4j2.configurationFile": (
        "quiet-log4j2.properties",
        "status = off\nrootLogger.level = off\n",
    ),
}


def quiet_logging() -> list[str]:
    """The JVM options that silence reload4j (3.x) and log4j2 (4.x) in a tool run on the host."""
    options = []
    for prop, (name, text) in _QUIET_LOGGING.items():
        path = cache_dir() / "kafka" / name
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{name}.{os.getpid()}")
            partial.write_text(text)
            partial.replace(path)  # another process may be reading it: never half-written
        url = f"file:{path}" if prop == "log4j.configuration" else str(path)
        options.append(f"-D{prop}={url}")
    return options


@dataclass
class ClassArchive:
    """JVM options that load a short-lived tool's classes from an archive (AppCDS) of its
    release and main class, made by its first run: a DumpLogSegments of a run's metadata logs
    took 0.44 CPU-s with it instead of 0.65, and a run starts such tools several times on the
    two cores it shares with the cluster. The first run writes the archive under a name of its
    own; ``done`` renames it into place only after a JVM that exited by itself (a killed one
    may have left half an archive), so concurrent runs never read a partial one.
    ``-Xlog:disable`` keeps the JVM's own notes (an archive of another JVM build is ignored
    with a warning) out of the tool's stdout, which callers parse."""

    options: list[str]
    partial: Path | None = None
    archive: Path | None = None

    @staticmethod
    def of(dist: KafkaDist, main: str) -> ClassArchive:
        archive = cache_dir() / "kafka" / "cds" / f"{dist.version}-{main}.jsa"
        if archive.is_file():
            return ClassArchive([f"-XX:SharedArchiveFile={archive}", "-Xlog:disable"])
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_name(f"{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        return ClassArchive(
            [f"-XX:ArchiveClassesAtExit={partial}", "-Xlog:disable"], partial, archive
        )

    def done(self, exited: bool) -> None:
        """``exited``: the JVM ended by itself (any exit code), not killed."""
        if self.partial is None or self.archive is None:
            return
        if exited and self.partial.is_file() and self.partial.stat().st_size > 0:
            self.partial.replace(self.archive)
        else:
            self.partial.unlink(missing_ok=True)


def run_tool(dist: KafkaDist, tool: str, args: list[str], timeout: float) -> tuple[int, str, str]:
    """One of Kafka's own tools (TOOL_CLASSES) from this release's jars, run on this host against
    the cluster's nodes, so that no node has to be alive to run it: (exit code, stdout, stderr),
    with exit code -1 and a sentence when it did not finish within ``timeout``. Its logging goes
    nowhere, so stdout is the tool's answer."""
    archive = ClassArchive.of(dist, dist.classes[tool])
    cmd = [
        "java",
        "-Xmx128m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        *archive.options,
        *quiet_logging(),
        "-cp",
        dist.host_classpath(),
        dist.classes[tool],
        *args,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        archive.done(exited=False)
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        return -1, out, f"{tool} did not finish within {timeout:.0f} s"
    archive.done(exited=done.returncode >= 0)
    return done.returncode, done.stdout, done.stderr


def check_release(version: str) -> None:
    """Refuses, without a network, what a run's version resolution would refuse of ``version``
    itself: a spelling that is no version, or a release older than kchaos supports, in the
    run's own words. Which release a line such as 3.9 means, and whether Maven Central has
    it, only the run finds out (resolve_offline_first)."""
    parts = parse_version(version)
    # Given the one release the request could mean, resolve_version refuses only the request.
    resolve_version(version, [".".join(map(str, (*parts, 0, 0)[:3]))])
