import pytest


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test session: starting one costs seconds."""
    from checkers.spark_session import spark_session

    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()
