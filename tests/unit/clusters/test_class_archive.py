"""Host-side Kafka tools load their classes from an archive their first run made (AppCDS)."""

from __future__ import annotations

from clusters import kafka_dist
from clusters.kafka_dist import ClassArchive, run_tool


def test_the_first_run_makes_the_archive_and_the_next_reads_it_with_the_same_answer(
    tmp_path, monkeypatch
):
    dist = kafka_dist.ensure_dist("3.9.2")  # from the real cache: its jars are assembled there
    monkeypatch.setattr(kafka_dist, "cache_dir", lambda: tmp_path)
    first = ClassArchive.of(dist, dist.classes["features"])
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in first.options)
    first.done(exited=True)  # no JVM ran: nothing to keep, nothing left behind
    assert not list((tmp_path / "kafka" / "cds").iterdir())

    code1, out1, _ = run_tool(dist, "features", ["--help"], timeout=120)
    archives = list((tmp_path / "kafka" / "cds").iterdir())
    assert [a.suffix for a in archives] == [".jsa"], archives
    code2, out2, _ = run_tool(dist, "features", ["--help"], timeout=120)
    assert (code1, out1) == (code2, out2) and "--bootstrap-server" in out1
    again = ClassArchive.of(dist, dist.classes["features"])
    assert again.options[0] == f"-XX:SharedArchiveFile={archives[0]}"


def test_a_killed_jvms_archive_is_never_kept(tmp_path, monkeypatch):
    dist = kafka_dist.ensure_dist("3.9.2")
    monkeypatch.setattr(kafka_dist, "cache_dir", lambda: tmp_path)
    archive = ClassArchive.of(dist, "Some")
    assert archive.partial is not None
    archive.partial.write_bytes(b"half")
    archive.done(exited=False)
    assert not list((tmp_path / "kafka" / "cds").iterdir())
