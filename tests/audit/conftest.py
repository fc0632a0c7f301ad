"""One SparkSession (local[2]) for every audit test: starting Spark is the expensive part."""
import shutil

import pytest


@pytest.fixture(scope="session")
def spark():
    from tenure.audit import spark_session
    from tenure.audit.job import session

    s = session("local[2]", app="tenure-audit-tests")
    log_dir = spark_session.JVM_LOG_DIR          # Spark's own log for the session: removed at its end
    yield s
    s.stop()
    if log_dir is not None:
        shutil.rmtree(log_dir, ignore_errors=True)
