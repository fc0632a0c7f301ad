import pytest

# `tenure_server` (a fresh in-process server on 127.0.0.1:0 per test, with inspection and fault
# injection) comes from the project's own pytest plugin, tenure/control/pytest_plugin.py (entry point pytest11).
pytest_plugins = ["pytester"]


@pytest.fixture
def wire(tenure_server):
    from tests.support.wire import WireClient
    c = WireClient.to(tenure_server.bootstrap)
    yield c
    c.close()


def pytest_terminal_summary(terminalreporter):
    """Print what tests measured (record_property: e.g. the SIGKILL rounds' acknowledged/recovered/lost
    counts) in the run's output, so CI logs carry the figures, not only junit XML."""
    rows = [(r.nodeid, r.user_properties) for outcome in ("passed", "failed")
            for r in terminalreporter.stats.get(outcome, []) if r.when == "call" and r.user_properties]
    if rows:
        terminalreporter.section("measured by the tests")
        for nodeid, props in rows:
            terminalreporter.write_line(nodeid)
            terminalreporter.write_line("    " + ", ".join(f"{k}={v}" for k, v in props))
