import gc

import pytest


@pytest.fixture(autouse=True)
def _free_clients_while_captured():
    """Client handles a test left in reference cycles (a confluent-kafka AdminClient held by its futures) are
    freed at the end of the test, while its output is still captured: librdkafka's lines from their last moments
    ("Connect to ... failed: Connection refused", the test's server being gone) stay in that test's output
    instead of landing in pytest's progress line later. Here only: a collection costs ~40 ms, nothing beside a
    real-client test, too much for the thousands of unit tests."""
    yield
    gc.collect()
