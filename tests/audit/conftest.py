"""One SparkSession (local[2]) for every audit test: starting Spark is the expensive part."""
import pytest


@pytest.fixture(scope="session")
def spark():
    from tenure.audit.job import session

    s = session("local[2]", app="tenure-audit-tests")
    yield s
    s.stop()
