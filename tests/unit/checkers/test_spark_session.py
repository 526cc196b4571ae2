"""How kchaos talks to Spark: the DataFrame API only (so Spark Connect works), and a driver
that listens on loopback whenever its executors are on this machine."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from checkers.scan.spark_session import binds_loopback, is_connect, spark_path

CHECKERS = Path(__file__).resolve().parents[3] / "checkers"
# What a Spark Connect session lacks: the SparkContext, RDDs, and the py4j gateway to the JVM.
CLASSIC_ONLY = {"sparkContext", "SparkContext", "rdd", "_jvm", "_jsc", "_jsparkSession"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.alias):
        return node.name.rpartition(".")[2]
    return None


def test_checkers_use_only_the_dataframe_api():
    used = [
        f"{path.relative_to(CHECKERS.parent)}:{getattr(node, 'lineno', '?')} {_name(node)}"
        for path in sorted(CHECKERS.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if _name(node) in CLASSIC_ONLY
    ]
    assert not used, used


@pytest.mark.parametrize(
    ("master", "loopback"),
    [
        (None, True),
        ("local[*]", True),
        ("local[2]", True),
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077", True),
        ("spark://10.0.0.5:7077", False),
        ("spark://spark-master.example:7077", False),
        ("yarn", False),
        ("k8s://https://127.0.0.1:6443", False),
    ],
)
def test_the_driver_listens_on_loopback_only_when_its_executors_are_here(master, loopback):
    assert binds_loopback(master) is loopback


def test_sc_urls_are_spark_connect():
    assert is_connect("sc://127.0.0.1:15002")
    assert not is_connect("spark://127.0.0.1:7077")
    assert not is_connect(None)


def test_spark_reads_local_files_by_absolute_file_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert spark_path("run/history.parquet") == f"file://{tmp_path}/run/history.parquet"
    assert spark_path(tmp_path / "a b.parquet") == f"file://{tmp_path}/a b.parquet"
    assert spark_path("s3a://bucket/run/history.parquet") == "s3a://bucket/run/history.parquet"
