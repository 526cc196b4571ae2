import zipfile

import pytest

from clusters.errors import ClusterError
from clusters.kafka_dist import _pom, discover_classes, parse_line, resolve_version

PUBLISHED = ["2.8.2", "3.2.3", "3.3.2", "3.8.1", "3.9.0", "3.9.1", "3.9.2", "4.0.2", "4.3.1"]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [("3.9", "3.9.2"), ("3.9.1", "3.9.1"), ("4", "4.3.1"), ("3.3", "3.3.2"), ("4.0", "4.0.2")],
)
def test_a_line_resolves_to_its_newest_release(requested, expected):
    assert resolve_version(requested, PUBLISHED) == expected


def test_unknown_version_names_the_known_ones():
    with pytest.raises(
        ClusterError, match=r"unknown Kafka version 3\.9\.7.*3\.9\.0, 3\.9\.1, 3\.9\.2"
    ):
        resolve_version("3.9.7", PUBLISHED)


@pytest.mark.parametrize("requested", ["3.2", "3.2.3", "2.8", "2"])
def test_versions_before_production_kraft_are_refused(requested):
    with pytest.raises(ClusterError, match="older than kchaos supports"):
        resolve_version(requested, PUBLISHED)


@pytest.mark.parametrize("requested", ["latest-ish", "3.x", "", "3.9.2.1"])
def test_malformed_versions_are_refused(requested):
    with pytest.raises(ClusterError, match="is not a Kafka version"):
        resolve_version(requested, PUBLISHED)


def test_release_lines_know_zookeeper_and_logging():
    assert parse_line("3.9.2").zookeeper and parse_line("3.9.2").logging == "reload4j"
    assert not parse_line("4.1.0").zookeeper and parse_line("4.1.0").logging == "log4j2"
    assert parse_line("3.4.0").migration and not parse_line("3.3.2").migration


def test_poms_bring_the_logging_backend_of_their_line():
    assert "slf4j-reload4j" in _pom("3.9.2") and "log4j-slf4j-impl" not in _pom("3.9.2")
    assert "log4j-slf4j-impl" in _pom("4.3.1") and "log4j-core" in _pom("4.3.1")


def test_tool_classes_are_found_wherever_the_line_put_them(tmp_path):
    # 3.3 kept FeatureCommand in kafka.admin; later lines moved it to org.apache.kafka.tools.
    with zipfile.ZipFile(tmp_path / "core.jar", "w") as zf:
        for cls in ("kafka/Kafka", "kafka/admin/FeatureCommand", "kafka/tools/StorageTool"):
            zf.writestr(f"{cls}.class", b"")
    found = discover_classes(tmp_path)
    assert found["features"] == "kafka.admin.FeatureCommand"
    assert found["storage"] == "kafka.tools.StorageTool"
    assert "metadata_shell" not in found
