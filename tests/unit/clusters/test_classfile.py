"""The class-file reader against the real jars in the host cache (no Docker, no JVM)."""

from __future__ import annotations

import zipfile

import pytest

from clusters.classfile import ClassFileError, class_index, declared_methods, method_names
from tests.kafka_jars import kafka_libs


def libs(version: str):
    return kafka_libs(version)


@pytest.mark.parametrize("version", ["3.9.2", "4.1.2", "4.3.1"])
def test_the_controller_event_classes_declare_run(version):
    found = declared_methods(
        libs(version), "org.apache.kafka.controller.QuorumController$ControllerWriteEvent"
    )
    assert found is not None
    jar, methods = found
    assert jar == f"kafka-metadata-{version}.jar"
    assert {"run", "<init>", "future"} <= methods


def test_a_scala_private_method_has_its_mangled_name():
    jar, methods = declared_methods(libs("3.9.2"), "kafka.server.BrokerLifecycleManager")
    assert jar == "kafka_2.13-3.9.2.jar"
    assert "kafka$server$BrokerLifecycleManager$$sendBrokerHeartbeat" in methods
    assert "sendBrokerHeartbeat" not in methods


def test_a_class_that_moved_is_found_only_where_it_is():
    assert declared_methods(libs("4.3.1"), "org.apache.kafka.common.record.FileRecords") is None
    jar, methods = declared_methods(
        libs("4.3.1"), "org.apache.kafka.common.record.internal.FileRecords"
    )
    assert jar == "kafka-clients-4.3.1.jar" and {"append", "flush"} <= methods


def test_the_index_agrees_with_the_jar_listing():
    index = class_index(libs("3.9.2"))
    name = "org.apache.kafka.common.utils.Time"
    with zipfile.ZipFile(libs("3.9.2") / index[name]) as zf:
        assert "org/apache/kafka/common/utils/Time.class" in zf.namelist()


def test_not_a_class_file_is_refused():
    with pytest.raises(ClassFileError, match="bad magic"):
        method_names(b"PK\x03\x04" + bytes(20))
    with pytest.raises(ClassFileError, match="not a readable class file"):
        method_names(b"\xca\xfe\xba\xbe\x00\x00\x00\x3d\x00\x05\x01\x00")
