"""Small Java programs of kchaos's own compiled against one Kafka release's jars, run on the host.

Kafka's record classes (`FileRecords`, `MemoryRecords`, ...) moved from
`org.apache.kafka.common.record` to `org.apache.kafka.common.record.internal` in 4.x: a source is
written against the old package, and its imports are rewritten for a release whose jars hold
the new one. Each (release, rewritten source) is compiled once into the cache beside the jars.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist

RECORDS = "org.apache.kafka.common.record."
MOVED_RECORDS = "org/apache/kafka/common/record/internal/FileRecords.class"


class JavaToolError(ClusterError):
    """A tool that cannot be built: no JDK, or it does not compile against the release."""


def records_moved(dist: KafkaDist) -> bool:
    """Whether the release's record classes are in `record.internal` (Kafka 4.x)."""
    for jar in (dist.home / "libs").glob("kafka-clients-*.jar"):
        with zipfile.ZipFile(jar) as zf:
            try:
                zf.getinfo(MOVED_RECORDS)
            except KeyError:
                return False
            return True
    return False


def source_for(dist: KafkaDist, source: Path) -> str:
    """The source's text with its record imports in the release's package."""
    text = source.read_text()
    if not records_moved(dist):
        return text
    # Only the classes that moved: TimestampType stayed.
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith(f"import {RECORDS}") and "TimestampType" not in line:
            line = line.replace(RECORDS, f"{RECORDS}internal.", 1)
        lines.append(line)
    return "".join(lines)


def compiled_tool(dist: KafkaDist, source: Path) -> Path:
    """A jar of `source`'s classes for `dist`, compiled on first use. A jar, not a directory:
    a JVM archiving its classes for the next start (ClassArchive) refuses a directory on its
    class path."""
    text = source_for(dist, source)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    jar = dist.home / "kchaos-tools" / f"{source.stem}-{digest}.jar"
    if jar.is_file():
        return jar
    tmp = jar.with_name(f"{jar.stem}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "src").mkdir(parents=True)
    src = tmp / "src" / source.name
    src.write_text(text)
    why = javac_into(dist, [src], tmp)
    if why is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise JavaToolError(f"{source.stem} {why}")
    shutil.rmtree(tmp / "src")
    partial = tmp / jar.name
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
        for cls in sorted(tmp.rglob("*.class")):
            zf.write(cls, cls.relative_to(tmp).as_posix())
    # Another process may have won the race: its classes are the same.
    partial.replace(jar)
    shutil.rmtree(tmp, ignore_errors=True)
    return jar


def javac_into(dist: KafkaDist, sources: list[Path], out: Path) -> str | None:
    """Compiles `sources` against `dist`'s jars into the directory `out`: None when they
    compiled, else why not, as the end of a sentence naming what was compiled (javac missing,
    or the last lines javac printed)."""
    javac = shutil.which("javac")
    if javac is None:
        return "needs javac (a JDK 17) on the PATH"
    proc = subprocess.run(
        [javac, "-nowarn", "-cp", dist.host_classpath(), "-d", str(out), *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return f"did not compile against Kafka {dist.version}: " + " | ".join(tail)
    return None


def tool_classpath(dist: KafkaDist, jar: Path) -> str:
    return f"{jar}{os.pathsep}{dist.host_classpath()}"
