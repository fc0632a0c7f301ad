import pytest

# `tenure_server` (a fresh in-process server on 127.0.0.1:0 per test, with inspection and fault
# injection) comes from the project's own pytest plugin, tenure/pytest_plugin.py (entry point pytest11).
pytest_plugins = ["pytester"]


@pytest.fixture
def wire(tenure_server):
    from tests.support.wire import WireClient
    c = WireClient.to(tenure_server.bootstrap)
    yield c
    c.close()
