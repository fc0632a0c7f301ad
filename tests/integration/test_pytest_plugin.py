"""The pytest plugin that ships with tenure (entry point pytest11): a project that installs tenure gets
`tenure_server` with no conftest of its own. Each case runs a small test file in a pytest of its own."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(180)

INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"   # pytest-asyncio is installed too


@pytest.fixture(autouse=True)
def _ini(pytester):
    pytester.makeini(INI)

CONSUMER_TEST = '''
from confluent_kafka import Consumer, Producer

def consume_one(bootstrap, group, topic, instance):
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, b"hello")
    p.flush(10)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        for _ in range(100):
            m = c.poll(0.2)
            if m is not None and not m.error():
                return m.value()
    finally:
        c.close()
'''


def test_function_scope_gives_each_test_a_fresh_server(pytester):
    pytester.makepyfile(CONSUMER_TEST + '''
seen = []

def test_one(tenure_server):
    assert consume_one(tenure_server.bootstrap, "g", "t", "i-1") == b"hello"
    g = tenure_server.group("g")
    assert g.generation == 1 and g.member("i-1").assignment == {"t": [0]}
    seen.append(tenure_server.bootstrap)

def test_two(tenure_server, tenure_bootstrap):
    assert tenure_server.group("g") is None and tenure_server.groups() == []
    assert tenure_bootstrap == tenure_server.bootstrap
    assert tenure_bootstrap != seen[0]          # another server, another port
''')
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_a_suite_that_turns_warnings_into_errors_gets_none_from_tenure(pytester):
    """A user's suite with `filterwarnings = error`, in a fresh process (nothing imported yet): starting
    tenure_server, inspecting a group (its assignments are decoded with kafka-python's codecs) and
    restarting raise no warning (kafka-python's schema loader warns on import, tenure keeps it in)."""
    pytester.makeini(INI + "filterwarnings =\n    error\n")
    pytester.makepyfile(CONSUMER_TEST + '''
def test_one(tenure_server):
    assert consume_one(tenure_server.bootstrap, "g", "t", "i-1") == b"hello"
    assert tenure_server.group("g").member("i-1").assignment == {"t": [0]}
    tenure_server.restart()
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=1, warnings=0)
    assert "warnings summary" not in result.stdout.str()


def test_session_scope_keeps_the_address_and_resets_the_state(pytester):
    pytester.makeini(INI + "tenure_scope = session\n")
    pytester.makepyfile(CONSUMER_TEST + '''
seen = []

def test_one(tenure_server):
    assert consume_one(tenure_server.bootstrap, "g", "t", "i-1") == b"hello"
    tenure_server.faults.delay("Heartbeat", 10)
    assert tenure_server.rebalances("g") == 1
    seen.append(tenure_server.bootstrap)

def test_two(tenure_server):
    assert tenure_server.bootstrap == seen[0]    # the same server, the same address
    assert tenure_server.groups() == [] and tenure_server.faults.rules() == []
    assert tenure_server.rebalances("g") == 0
    assert consume_one(tenure_server.bootstrap, "g", "t", "i-1") == b"hello"   # a new topic: offset 0
''')
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_session_scope_without_isolation_keeps_state(pytester):
    pytester.makeini(INI + "tenure_scope = session\ntenure_isolation = none\n")
    pytester.makepyfile('''
def test_one(tenure_server):
    tenure_server.call(lambda: tenure_server.server.topics.create("kept", 2))

def test_two(tenure_server):
    assert tenure_server.call(lambda: tenure_server.server.topics.get("kept")) is not None
''')
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_marker_with_a_data_dir_survives_restart(pytester):
    pytester.makepyfile(CONSUMER_TEST + '''
import os, pytest

@pytest.mark.tenure(data_dir=True, min_session_timeout_ms=1000)
def test_restart(tenure_server):
    assert os.path.isdir(tenure_server.config.data_dir)
    assert tenure_server.config.min_session_timeout_ms == 1000
    assert consume_one(tenure_server.bootstrap, "g", "t", "i-1") == b"hello"
    gen = tenure_server.group("g").generation
    tenure_server.restart()
    g = tenure_server.group("g")
    assert g.generation == gen and "i-1" in g.static_members

def test_default_is_in_memory(tenure_server):
    assert tenure_server.config.data_dir is None
''')
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_data_dir_option_for_every_server(pytester):
    pytester.makepyfile('''
import os

def test_dir(tenure_server):
    assert tenure_server.config.data_dir and os.path.isdir(tenure_server.config.data_dir)
    assert os.path.isdir(os.path.join(tenure_server.config.data_dir, "__consumer_offsets-0"))
''')
    pytester.runpytest("-p", "no:cacheprovider", "--tenure-data-dir").assert_outcomes(passed=1)


def test_a_bad_marker_is_a_usage_error(pytester):
    pytester.makepyfile('''
import pytest

@pytest.mark.tenure(no_such_option=1)
def test_x(tenure_server):
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert "unknown ServerConfig field(s) ['no_such_option']" in result.stdout.str()
    result.assert_outcomes(errors=1)
    assert result.ret != 0


def test_the_plugin_is_registered_by_the_installed_package():
    from importlib.metadata import entry_points
    assert [e.value for e in entry_points(group="pytest11") if e.name == "tenure"] == ["tenure.control.pytest_plugin"]


def test_the_examples_in_docs_testing_md_run_as_they_are(pytester):
    """Every ```python block of docs/testing.md is a test file that passes, unchanged (no placeholders)."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    pytester.makepyfile(**{f"test_doc_example_{i}": b for i, b in enumerate(blocks)})
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=len(blocks))


def test_a_misspelt_marker_key_suggests_the_closest_fields(pytester):
    pytester.makepyfile('''
import pytest

@pytest.mark.tenure(topic={"t": 2}, min_sesion_timeout_ms=1000)
def test_x(tenure_server):
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "unknown ServerConfig field(s) ['min_sesion_timeout_ms', 'topic']" in out, out
    assert "'topic': did you mean 'topics'?" in out, out
    assert "'min_sesion_timeout_ms': did you mean 'min_session_timeout_ms' or 'max_session_timeout_ms'?" in out, out
    result.assert_outcomes(errors=1)


def test_the_loop_scope_setting_docs_testing_md_gives_silences_pytest_asyncio(pytester):
    """The pytest.ini lines docs/testing.md tells users of pytest-asyncio to add: with them an async test using
    tenure_server_async runs with warnings as errors; without them pytest-asyncio warns."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    ini = re.search(r"\n    \[pytest\].*?\n    (asyncio_default_fixture_loop_scope = \w+)\n", text).group(1)
    pytester.makepyfile("""
import pytest

@pytest.mark.asyncio
async def test_async(tenure_server_async):
    assert tenure_server_async.bootstrap.startswith("127.0.0.1:")
""")
    warned = pytester.runpytest("-p", "no:cacheprovider")
    warned.assert_outcomes(passed=1)
    assert "asyncio_default_fixture_loop_scope" in warned.stdout.str()
    pytester.makeini(f"[pytest]\n{ini}\nfilterwarnings =\n    error\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_wait_for_group_and_topics_on_the_marker(pytester):
    pytester.makepyfile(CONSUMER_TEST + '''
import pytest

@pytest.mark.tenure(topics={"seeded": 12, "other": 1})
def test_seeded(tenure_server):
    topics = {t.name: len(t.partitions) for t in tenure_server.call(tenure_server.server.topics.all)}
    assert {n: p for n, p in topics.items() if not n.startswith("__")} == {"seeded": 12, "other": 1}
    with pytest.raises(TimeoutError, match="group 'g' not state Stable, members 1 after 0.2 s: "
                                            "last seen unknown to the server"):
        tenure_server.wait_for_group("g", members=1, timeout=0.2)
    assert consume_one(tenure_server.bootstrap, "g", "seeded", "i-1") == b"hello"
    g = tenure_server.wait_for_group("g", members=1)       # a static member stays after its close
    assert g.state == "Stable" and g.member("i-1").assignment == {"seeded": list(range(12))}

@pytest.mark.tenure(topics=["t"])
def test_bad_topics(tenure_server):
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*topics=...) takes {topic name: partitions}*"])


def test_groups_on_the_marker_set_expectations(pytester):
    pytester.makepyfile('''
import pytest

@pytest.mark.tenure(groups={"g": 4, "h": 1})
def test_expected(tenure_server):
    assert tenure_server.call(lambda: dict(tenure_server.server.runtime.expectations)) == {"g": 4, "h": 1}

@pytest.mark.tenure(groups={"g": 0})
def test_bad_groups(tenure_server):
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*groups=...) takes {group id: members it starts with}*"])


def test_no_rebalance_names_only_the_causes_inside_the_block(tenure_server):
    from tests.support.groups import GroupMember, wait_for
    tenure_server.create_topics({"nrc-t": 2})
    a = GroupMember("confluent", tenure_server.bootstrap, "nrc-g", "nrc-t", "a").start()
    try:
        wait_for(lambda: a.assignment == frozenset({0, 1}), 30, "a member")
        tenure_server.wait_for_group("nrc-g", state="Stable", members=1)
        assert tenure_server.group("nrc-g").rebalance_causes == {"member_joined": 1}
        with pytest.raises(AssertionError) as exc:
            with tenure_server.no_rebalance("nrc-g"):
                tenure_server.force_rebalance("nrc-g")
                tenure_server.wait_for_group("nrc-g", state="Stable", members=1)
        assert "(causes in the block: {'forced': 1})" in str(exc.value)
        assert "member_joined" not in str(exc.value)
    finally:
        a.stop()


@pytest.mark.asyncio
@pytest.mark.tenure(topics={"aw-t": 2})
async def test_the_async_fixture_waits_without_blocking_the_clients_loop(tenure_server_async):
    """aiokafka's consumer joins on the test's own event loop: a blocking wait would starve it."""
    from aiokafka import AIOKafkaConsumer
    c = AIOKafkaConsumer("aw-t", bootstrap_servers=tenure_server_async.bootstrap, group_id="aw-g",
                         group_instance_id="a-1")
    await c.start()
    try:
        g = await tenure_server_async.wait_for_group("aw-g", state="Stable", members=1, timeout=30)
        assert g.member("a-1").assignment == {"aw-t": [0, 1]}
        await tenure_server_async.restart()
        assert tenure_server_async.group("aw-g") is None      # in memory: the restart forgot it
    finally:
        await c.stop()


def test_from_tenure_import_server_thread_is_lazy():
    import subprocess
    import sys
    code = ("import sys, tenure\n"
            "assert not any(m == 'kafka' or m.startswith(('tenure.server', 'kafka.')) for m in sys.modules)\n"
            "from tenure import ServerThread, ServerConfig\n"
            "with ServerThread(ServerConfig(port=0)) as s:\n"
            "    print(s.bootstrap.startswith('127.0.0.1:'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def test_a_tests_hooks_and_network_faults_end_with_it_and_an_unseen_hook_error_fails_it(pytester):
    """The plugin removes a test's request hooks and heals its network faults at its end (here with one
    server for the session); an exception a hook raised that the test never saw fails that test."""
    pytester.makeini("[pytest]\ntenure_scope = session\n")
    pytester.makepyfile('''
from kafka import KafkaProducer

def test_leaves_a_raising_hook_and_a_partition(tenure_server):
    def broken(call):
        raise RuntimeError("oops in the hook")
    tenure_server.on_request("Metadata", broken)
    tenure_server.network.partition(client_id="nobody")
    p = KafkaProducer(bootstrap_servers=tenure_server.bootstrap)
    assert p.partitions_for("t") == {0}        # served as if there were no hook
    p.close(5)

def test_next_starts_clean(tenure_server):
    assert tenure_server.hooks.hooks() == () and tenure_server.network.rules() == []
    assert tenure_server.hooks.errors == []
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["* exception(s) raised by request hook(s) during the test; first, by broken "
                                 "on Metadata: RuntimeError: oops in the hook*"])


def test_marker_listeners_and_users_with_ready_client_settings(pytester):
    """`@pytest.mark.tenure(listeners=[...], users={...})` and the `tenure_clients` fixture: a project's test gets
    a secured server and settings its clients take as they are (docs/security.md)."""
    pytester.makepyfile('''
import pytest
from confluent_kafka import Producer

@pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_SSL"], users={"alice": "secret"})
def test_secured(tenure_server, tenure_clients):
    conf = tenure_clients("SASL_SSL", "alice").confluent()
    assert conf["sasl.username"] == "alice" and conf["sasl.password"] == "secret" and conf["ssl.ca.location"]
    p = Producer(conf)
    p.produce("t", b"x")
    assert p.flush(15) == 0
    assert {c["principal"] for c in tenure_server.connections()} == {"User:alice"}
    assert tenure_clients("PLAINTEXT").confluent() == {"bootstrap.servers": tenure_server.bootstrap,
                                                       "security.protocol": "plaintext"}
''')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
