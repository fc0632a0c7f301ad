"""What `import tenure.server` may load: only what serving needs. kafka-python's client packages (admin,
consumer, producer, networking), the audit's and the catch-up consumer's dependencies and the clients tests use
stay out of the server's start-up; kafka-python's package itself still works in full for a test that imports
tenure first and then a kafka-python client."""
from __future__ import annotations

import json
import subprocess
import sys

DENIED = (
    "kafka.admin", "kafka.consumer", "kafka.producer", "kafka.net", "kafka.coordinator", "kafka.client_async",
    "kafka.cluster", "kafka.sasl",
    "tenure.audit", "tenure.catchup", "pyspark", "pyarrow", "matplotlib", "confluent_kafka", "aiokafka",
    # crc32c's __init__ reads its version with importlib.metadata (which imports email): tenure takes the C functions
    # only; RE2 is imported at a group's first regular expression
    "importlib.metadata", "email", "crc32c._cli", "re2",
    # kafka-python's API classes are imported when a request of the API first comes (protocol/apis.py ApiClasses);
    # at import only the modules the server's layers take names from (groups, ACLs, producer); SASL's at the first
    # SASL answer (protocol/error_responses.py)
    "kafka.protocol.admin.topics", "kafka.protocol.admin.configs", "kafka.protocol.admin.cluster",
    "kafka.protocol.admin.client_quotas", "kafka.protocol.admin.users", "kafka.protocol.admin.transactions",
    "kafka.protocol.consumer.fetch", "kafka.protocol.consumer.offsets", "kafka.protocol.metadata.api_versions",
    "kafka.protocol.producer.produce", "kafka.protocol.sasl",
    # the command line's parser: imported by the command line (tenure/tools/cli.py), not by the server's settings
    "argparse", "gettext",
    # ServerThread's module and the table of controls its methods are made from: at the first use of the name
    # (tenure/server/__init__.py); `tenure serve` runs a Server
    "tenure.server.thread", "tenure.control.registry",
    # the data dir and its segment logs: opened by a server with --data-dir (tenure/server/build.py open_topics)
    "tenure.storage.datadir", "tenure.storage.segments", "tenure.storage.recovery", "tenure.storage.segment_file",
    "tenure.storage.cleanshut", "tenure.storage.checkpoints",
    # ... and the segment reader's batches, which a load reads records with: a server in memory loads empty
    # partitions at start, so the first load that reads a batch imports it (coordinator/loader.py)
    "tenure.storage.reader",
    # the controls' group views: imported by the controls that make them (tenure/control/registry.py); the read model
    # of a group they are made of, at a group kind's first `info` (coordinator/classic/__init__.py)
    "tenure.control.views", "tenure.inspection",
    # the server's deferred parts (tenure/deferred.py), imported when first started: the transaction
    # coordinator (and kafka-python's transaction APIs), the share coordinator, with their internal topics' records
    "kafka.protocol.producer.transaction", "tenure.coordinator.transactions", "tenure.coordinator.txn_runtime",
    "tenure.protocol.txn_records", "tenure.coordinator.share_state", "tenure.protocol.share_state_records",
    # the log cleaner's passes: at its first pass (tenure/server/cleaner.py)
    "tenure.storage.compaction", "tenure.storage.cleaning",
    # the ACLs: the authorizer when --authorizer is on, the ACL APIs at their first request (tenure/server/build.py)
    "tenure.security.authorizer", "tenure.security.acls", "tenure.security.acl_apis", "kafka.protocol.admin.acl",
    # the KIP-848 consumer and the share group kinds (coordinator/kinds.py LazyKind) with their records: at a
    # shard's first request, record or group of either
    "tenure.coordinator.consumer", "tenure.coordinator.migration", "tenure.protocol.consumer_group_records",
    "tenure.coordinator.share", "tenure.protocol.share_group_records",
    # the SASL servers and the OAUTHBEARER validator: at a SASL listener's first connection (tenure/server/security.py);
    # the certificates, with a TLS listener
    "tenure.security.sasl", "tenure.security.oauth", "tenure.security.tls",
    # the broker's share partitions and sessions (broker/share.py): at the first share request (broker/share_apis.py);
    # kafka-python's consumer protocol classes (a member's subscription and assignment): at a classic group's first
    # OffsetDelete or view (coordinator/classic/__init__.py)
    "tenure.broker.share", "kafka.protocol.consumer.metadata",
    # kafka-python's readers and writers of the old message formats (v0, v1) and its record package's `__init__`
    # that imports them: at the first old Produce or Fetch (broker/message_format.py)
    "kafka.record.memory_records", "kafka.record.legacy_records",
)
# the parts above that tenure/deferred.py imports on first use: a started server has none of them either
DEFERRED_PARTS = DENIED[DENIED.index("kafka.protocol.producer.transaction"):]


def _modules_after(code: str, *flags: str) -> list[str]:
    out = subprocess.run([sys.executable, *flags, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_tenure_server_loads_nothing_on_the_deny_list():
    loaded = _modules_after("import tenure.server")
    bad = sorted(m for m in loaded if any(m == d or m.startswith(d + ".") for d in DENIED))
    assert bad == [], f"import tenure.server pulled in {bad}"
    assert "kafka.protocol" in loaded                   # the one codec engine is there


def test_kafka_python_clients_work_after_tenure_was_imported_even_with_warnings_as_errors():
    loaded = _modules_after("import tenure.server\nfrom kafka import KafkaConsumer, KafkaProducer, TopicPartition\n"
                            "import kafka\nassert kafka.__version__ and kafka.KafkaAdminClient\n"
                            "assert KafkaConsumer.__module__ == 'kafka.consumer.group'", "-W", "error")
    assert "kafka.consumer" in loaded


def test_crc32c_works_in_full_after_tenure_was_imported():
    _modules_after("import tenure.server, sys\nimport crc32c\nassert crc32c.crc32c(b'123456789') == 0xE3069283\n"
                   "assert 'importlib.metadata' not in sys.modules\n"
                   "from crc32c import CRC32CHash, __version__\nassert __version__ and CRC32CHash\n"
                   "from kafka.record.util import calc_crc32c\nassert calc_crc32c(b'123456789') == 0xE3069283",
                   "-W", "error")


def test_a_regular_expression_subscription_still_compiles_with_re2():
    loaded = _modules_after("import tenure.server\nfrom tenure.coordinator.consumer.regex import compile_regex\n"
                            "assert compile_regex('top.*').fullmatch('topic')")
    assert "re2" in loaded


def test_server_thread_is_imported_when_its_name_is_first_asked_for():
    """`import tenure.server` leaves ServerThread's module (and the controls' table) out; the first time the name is
    asked - `from tenure.server import ServerThread` or the package's attribute - it is imported, once, with
    automatic collection held off as the package's own import; then both names are plain attributes, the same
    classes, and an unknown name is still an AttributeError (-W error)."""
    _modules_after("import gc, sys, tenure.server\n"
                   "assert 'tenure.server.thread' not in sys.modules and 'tenure.control.registry' not in sys.modules\n"
                   "assert 'ServerThread' not in vars(tenure.server)\n"
                   "before = gc.get_stats()[0]['collections']\n"
                   "from tenure.server import ServerThread\n"
                   "assert gc.get_stats()[0]['collections'] - before <= 2 and gc.isenabled()\n"
                   "import tenure.server.thread as thread\n"
                   "assert ServerThread is thread.ServerThread is vars(tenure.server)['ServerThread']\n"
                   "assert tenure.server.AsyncServerThread is thread.AsyncServerThread\n"
                   "assert callable(ServerThread.expire_session)       # a method the controls' table made\n"
                   "try:\n"
                   "    tenure.server.NoSuchName\n"
                   "except AttributeError as exc:\n"
                   "    assert 'NoSuchName' in str(exc)\n"
                   "else:\n"
                   "    raise AssertionError('an unknown name must raise AttributeError')\n"
                   "st = ServerThread(port=0).start()\n"
                   "st.stop()", "-W", "error")
    _modules_after("from tenure.server import AsyncServerThread, ServerThread\n"
                   "import tenure.server.thread as thread\n"
                   "assert (AsyncServerThread, ServerThread) == (thread.AsyncServerThread, thread.ServerThread)")


def test_the_first_server_threads_start_imports_no_module():
    """uvloop (when installed and not refused by TENURE_EVENT_LOOP) comes with ServerThread's class, not inside the
    first server's start, which a test fixture waits for: that start imports nothing but the standard library's
    `resource` (the descriptor limit, a C module); with TENURE_EVENT_LOOP=asyncio uvloop is never imported."""
    import importlib.util
    import os
    code = ("import sys\n"
            "from tenure.server import ServerThread\n"
            "before = set(sys.modules)\n"
            "st = ServerThread(port=0).start()\n"
            "st.stop()\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))\n"
            "print(json.dumps('uvloop' in sys.modules))\n")
    code = "import json\n" + code
    for env, uv in ((None, importlib.util.find_spec("uvloop") is not None), ("asyncio", False)):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if k != "TENURE_EVENT_LOOP"}
                             | ({"TENURE_EVENT_LOOP": env} if env else {}))
        assert out.returncode == 0, out.stderr
        new, has_uvloop = (json.loads(line) for line in out.stdout.strip().splitlines()[-2:])
        assert set(new) <= {"resource"} and has_uvloop is uv, (env, new, has_uvloop)


def test_the_first_sasl_answer_imports_kafka_pythons_sasl_classes_quietly():
    """kafka-python's SASL classes are imported at the first SASL answer, with its schema reads' warning silenced
    (a process run with `-W error`), and they are kafka-python's own."""
    _modules_after("import sys, tenure.server\n"
                   "from tenure.protocol.error_responses import sasl_authenticate_error, sasl_handshake_error\n"
                   "assert 'kafka.protocol.sasl' not in sys.modules\n"
                   "r = sasl_handshake_error(33, ['PLAIN'])\n"
                   "a = sasl_authenticate_error(58, 'no')\n"
                   "from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse\n"
                   "assert type(r) is SaslHandshakeResponse and (r.error_code, r.mechanisms) == (33, ['PLAIN'])\n"
                   "assert type(a) is SaslAuthenticateResponse and (a.error_code, a.error_message) == (58, 'no')",
                   "-W", "error")


def test_kafka_imported_before_tenure_is_left_as_it_is():
    _modules_after("import kafka\nfrom kafka import KafkaConsumer\nimport tenure.server\n"
                   "assert kafka.KafkaConsumer is KafkaConsumer")


def test_threads_that_import_kafka_python_clients_at_once_all_get_them():
    """The first name asked for runs kafka-python's __init__ on one thread; threads asking meanwhile wait for it
    (consumers started on threads import their client at the same moment)."""
    _modules_after("import threading, tenure.server\n"
                   "errors = []\n"
                   "def use():\n"
                   "    try:\n"
                   "        from kafka import ConsumerRebalanceListener, KafkaConsumer  # noqa: F401\n"
                   "    except Exception as exc:\n"
                   "        errors.append(exc)\n"
                   "ts = [threading.Thread(target=use) for _ in range(16)]\n"
                   "[t.start() for t in ts]\n"
                   "[t.join() for t in ts]\n"
                   "assert errors == [], errors")


RECORD_MODULES = ("records", "consumer_group_records", "share_group_records", "share_state_records", "txn_records",
                  "share_group", "consumer_group")


# the classes built at import: none (the coordinator's group kinds and the error answers take the share and consumer
# group APIs' response classes at their first answer)
FORCED: dict[str, list[str]] = {}


def test_import_tenure_server_builds_no_record_class():
    """The internal topics' key and value classes, and the share and consumer group APIs' classes, are built from
    their JSON schemas the first time they are used, not at import (structs.LazySchemas)."""
    _modules_after("import tenure.server, importlib\n"
                   f"FORCED = {FORCED!r}\n"
                   f"for m in {RECORD_MODULES!r}:\n"
                   "    lazy = importlib.import_module('tenure.protocol.' + m)._S\n"
                   "    built = sorted(n for n in lazy.names() if n in vars(lazy))\n"
                   "    assert lazy.names() and built == FORCED.get(m, []), (m, built)")


def test_a_record_class_is_built_once_on_first_use_even_by_threads_at_once_with_warnings_as_errors():
    _modules_after("import threading\n"
                   "from tenure.protocol import records as rec\n"
                   "from tenure.protocol import txn_records\n"
                   "got, errors = [], []\n"
                   "def use():\n"
                   "    try:\n"
                   "        got.append(rec.OffsetCommitKey)\n"
                   "    except Exception as exc:\n"
                   "        errors.append(exc)\n"
                   "ts = [threading.Thread(target=use) for _ in range(16)]\n"
                   "[t.start() for t in ts]\n"
                   "[t.join() for t in ts]\n"
                   "assert errors == [] and len(got) == 16 and len(set(got)) == 1, (errors, got)\n"
                   "cls = got[0]\n"
                   "assert cls.__name__ == 'OffsetCommitKey' and cls.__module__ == 'tenure.protocol.records'\n"
                   "assert rec._S.OffsetCommitKey is cls and vars(rec._S)['OffsetCommitKey'] is cls\n"
                   "key = cls(group='g', topic='t', partition=3).encode(version=1)\n"
                   "assert rec.offset_commit_key(bytes(key)) == ('g', 't', 3)\n"
                   "assert txn_records.TransactionLogValue.max_version >= 1\n"
                   "try:\n"
                   "    rec.NoSuchKey\n"
                   "except AttributeError as exc:\n"
                   "    assert 'NoSuchKey' in str(exc)\n"
                   "else:\n"
                   "    raise AssertionError('an unknown name must raise AttributeError')", "-W", "error")


def test_a_real_client_against_an_in_process_server_with_warnings_as_errors_gets_every_class_built_on_first_use():
    """kafka-python 3 creates a topic, produces and consumes in a group against a ServerThread of a process run
    with `-W error` (a suite's `filterwarnings = error`): the classes of each API it sends and the records the
    coordinator writes are built at their first use, in the server's thread, and none of them fails on a warning."""
    _modules_after(
        "import tenure.server, sys\n"
        "from tenure.protocol.apis import SUPPORTED\n"
        "from tenure.protocol import records as rec\n"
        "assert SUPPORTED[19].classes.pair is None and 'OffsetCommitValue' not in vars(rec._S)\n"
        "st = tenure.server.ServerThread(port=0).start()\n"
        "try:\n"
        "    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer\n"
        "    from kafka.admin import NewTopic\n"
        "    admin = KafkaAdminClient(bootstrap_servers=st.bootstrap)\n"
        "    admin.create_topics([NewTopic('lazy', 1, 1)])\n"
        "    admin.close()\n"
        "    p = KafkaProducer(bootstrap_servers=st.bootstrap)\n"
        "    for i in range(5):\n"
        "        p.send('lazy', str(i).encode())\n"
        "    p.flush(); p.close()\n"
        "    c = KafkaConsumer('lazy', bootstrap_servers=st.bootstrap, group_id='g', auto_offset_reset='earliest',\n"
        "                      consumer_timeout_ms=10000)\n"
        "    got = [m.value for _, m in zip(range(5), c)]\n"
        "    c.commit(); c.close()\n"
        "    assert got == [b'0', b'1', b'2', b'3', b'4'], got\n"
        "finally:\n"
        "    st.stop()\n"
        "for key in (0, 1, 8, 11, 14, 19):     # Produce, Fetch, OffsetCommit, JoinGroup, SyncGroup, CreateTopics\n"
        "    assert SUPPORTED[key].classes.pair is not None, SUPPORTED[key].name\n"
        "assert 'OffsetCommitValue' in vars(rec._S) and 'GroupMetadataValue' in vars(rec._S)",
        "-W", "error")


# what the serve command's process leaves out: the admin HTTP client (urllib.request, http.client, email) and the
# other commands' modules (their parsers are not built for `tenure serve`)
SERVE_DENIED = ("urllib.request", "urllib.error", "http.client", "email", "tenure.control.commands",
                "tenure.server.thread", "tenure.storage.datadir", "tenure.storage.segments", "tenure.control.http_client", "tenure.tools.logtool", "tenure.tools.logdir", "tenure.tools.logdump",
                "tenure.tools.logverify", "tenure.tools.synth", "tenure.tools.demo", "tenure.audit")


def _denied(loaded: list[str], denied: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == d or m.startswith(d + ".") for d in denied))


def test_a_serving_tenure_serve_process_imports_no_other_commands_module_nor_the_http_client(tmp_path):
    """`tenure serve` run through the command line's main() to ready (its ready file written, the admin endpoint
    on and its aiohttp.web imported by its import thread), then stopped with SIGTERM as a user stops it: what its
    process has loaded by then. aiohttp.web itself imports `email`, `http.client` and `urllib.request`; the
    snapshot is taken once that import has ended (before, it raced it), and those three count only when the admin
    endpoint's own modules do not bring them: the command line's tenure modules are denied outright."""
    ready, mods = tmp_path / "ready.json", tmp_path / "modules.json"
    loaded = _modules_after(
        "import json, os, signal, sys, threading, time\n"
        "def watch():\n"
        f"    while not os.path.exists({str(ready)!r}) or 'aiohttp.web' not in sys.modules or any(\n"
        "            t.name == 'tenure-admin-import' for t in threading.enumerate()):\n"
        "        time.sleep(0.02)\n"
        f"    with open({str(mods)!r}, 'w') as f:\n"
        "        json.dump(sorted(sys.modules), f)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "threading.Thread(target=watch, daemon=True).start()\n"
        "from tenure.tools.cli import main\n"
        f"assert main(['serve', '--port', '0', '--admin-port', '0', '--ready-file', {str(ready)!r}]) == 0\n"
        f"assert not os.path.exists({str(ready)!r})")
    serving = json.loads(mods.read_text())
    assert "tenure.control.http_server" in serving and "tenure.server" in serving   # it did serve, admin on
    assert "aiohttp.web" in serving
    # what serving with the admin endpoint loads anyway: the server and aiohttp.web (its own stdlib imports)
    endpoint = set(_modules_after("import tenure.server, tenure.control.http_server, aiohttp.web"))
    assert {"email", "http.client"} <= endpoint          # aiohttp.web brings these; the check below is for the rest
    for when, mods_ in (("serving", serving), ("at its exit", loaded)):
        extra = _denied([m for m in mods_ if m not in endpoint or m.startswith("tenure.")], SERVE_DENIED)
        assert extra == [], f"tenure serve loaded {extra} ({when})"


def test_tenure_serve_help_builds_only_the_serve_parser():
    """`python -m tenure serve --help` (the console script's path) prints the serve command's help and imports none
    of the other commands' modules; `tenure --help` still builds them all."""
    code = ("import sys, io, contextlib\nfrom tenure.tools.cli import main\nout = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    try:\n        main(ARGV)\n    except SystemExit as exc:\n        assert exc.code == 0, exc\n"
            "assert 'usage: tenure' in out.getvalue(), out.getvalue()\n")
    serve = _modules_after(code.replace("ARGV", "['serve', '--help']"))
    assert _denied(serve, SERVE_DENIED) == []
    everything = _modules_after(code.replace("ARGV", "['--help']"))
    assert {"tenure.control.commands", "tenure.tools.logtool", "urllib.request"} <= set(everything)
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "tenure", "serve", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("usage: tenure serve "), out.stderr[-500:]
    imported = [line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")]
    assert "tenure.tools.cli" in imported and _denied(imported, SERVE_DENIED) == []


def test_the_serve_only_parser_prints_and_parses_as_the_whole_parser():
    """What `tenure serve ...` prints (its help, its errors, the top level's error for an argument serve leaves
    over) and the namespace it parses are the whole parser's, byte for byte."""
    import contextlib
    import io

    from tenure.tools.cli import _parser

    def run(parser, argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                got = vars(parser.parse_args(argv))
                code = None
            except SystemExit as exc:
                got, code = None, exc.code
        return got, code, out.getvalue(), err.getvalue()

    for argv in (["serve"], ["serve", "--help"], ["serve", "-h", "--bogus"], ["serve", "--bogus"], ["serve", "extra"],
                 ["serve", "--port", "x"], ["serve", "--port"], ["serve", "--log-format", "xml"],
                 ["serve", "--port", "0", "--no-admin", "--log-level", "DEBUG", "--ready-file", "r.json"]):
        whole, only = run(_parser(), argv), run(_parser(argv), argv)
        assert only == whole, argv
        assert whole[2] or whole[3] or whole[0], argv          # each printed or parsed something
    err = run(_parser(["serve", "--bogus"]), ["serve", "--bogus"])[3]
    assert "{serve,apis,demo," in err and err.endswith("tenure: error: unrecognized arguments: --bogus\n"), err


def test_a_started_server_imports_each_deferred_part_only_when_a_real_client_first_uses_it(tmp_path):
    """A ServerThread with a data dir, started and served (a process run with `-W error`): none of the deferred
    parts is imported, nor after a topic is created. Then kafka-python 3 asks for the ACLs (answered
    SECURITY_DISABLED without --authorizer), runs a transaction and the log cleaner makes a pass: each part is
    imported then, its warnings silenced, and serves as always (the transaction's records are read back
    committed)."""
    _modules_after(
        "import sys, time, tenure.server\n"
        f"DEFERRED = {DEFERRED_PARTS!r}\n"
        "def loaded():\n"
        "    return sorted(m for m in DEFERRED if m in sys.modules)\n"
        f"st = tenure.server.ServerThread(port=0, data_dir={str(tmp_path / 'data')!r}, cleaner_interval_ms=0).start()\n"
        "try:\n"
        "    assert loaded() == [], loaded()        # (kafka-python's clients import its own ACL and txn classes)\n"
        "    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer\n"
        "    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, NewTopic, ResourcePatternFilter\n"
        "    from kafka.admin import ResourceType, ACLResourcePatternType\n"
        "    from kafka.errors import SecurityDisabledError\n"
        "    admin = KafkaAdminClient(bootstrap_servers=st.bootstrap)\n"
        "    admin.create_topics([NewTopic('t', 1, 1, topic_configs={'cleanup.policy': 'compact'})])\n"
        "    assert [m for m in loaded() if m.startswith('tenure.')] == [], loaded()\n"
        "    flt = ACLFilter(None, '*', ACLOperation.ANY, ACLPermissionType.ANY,\n"
        "                    ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))\n"
        "    try:\n"
        "        admin.describe_acls(flt)\n"
        "    except SecurityDisabledError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('describe_acls without an authorizer must answer SECURITY_DISABLED')\n"
        "    admin.close()\n"
        "    assert 'tenure.security.acl_apis' in sys.modules\n"
        "    assert 'tenure.coordinator.transactions' not in sys.modules\n"
        "    p = KafkaProducer(bootstrap_servers=st.bootstrap, transactional_id='tx')\n"
        "    p.init_transactions(); p.begin_transaction()\n"
        "    p.send('t', key=b'k', value=b'v'); p.commit_transaction(); p.close()\n"
        "    assert {'tenure.coordinator.txn_runtime', 'tenure.protocol.txn_records'} <= set(sys.modules)\n"
        "    c = KafkaConsumer('t', bootstrap_servers=st.bootstrap, isolation_level='read_committed',\n"
        "                      auto_offset_reset='earliest', consumer_timeout_ms=10000)\n"
        "    got = [(m.key, m.value) for _, m in zip(range(1), c)]\n"
        "    c.close()\n"
        "    assert got == [(b'k', b'v')], got\n"
        "    assert 'tenure.storage.compaction' not in sys.modules\n"
        "    stats = st.compact_now()\n"
        "    from tenure.storage.compaction import CleanStats\n"
        "    assert type(stats) is CleanStats and type(st.server.cleaner_stats) is CleanStats, stats\n"
        "finally:\n"
        "    st.stop()",
        "-W", "error")


def test_share_partitions_and_the_consumer_protocol_classes_are_imported_when_real_clients_first_need_them():
    """A ServerThread started (a process run with `-W error`) imports neither the broker's share partitions nor
    kafka-python's consumer protocol classes, and confluent-kafka producing brings in neither. A confluent-kafka
    consumer in a classic group forms it and consumes without them (the rebalance's log lines read the group's
    state, not its read model); the group's view reads its members' assignments in the consumer protocol, which
    imports the classes, and shows the assignment; the share partitions are still not imported. A confluent-kafka ShareConsumer's
    first share request imports them, and it gets records."""
    _modules_after(
        "import sys, time, tenure.server\n"
        "from confluent_kafka import Consumer, Producer, ShareConsumer\n"
        "SHARE, PROTOCOL = 'tenure.broker.share', 'kafka.protocol.consumer.metadata'\n"
        "st = tenure.server.ServerThread(port=0, initial_rebalance_delay_ms=0).start()\n"
        "try:\n"
        "    assert SHARE not in sys.modules and PROTOCOL not in sys.modules\n"
        "    p = Producer({'bootstrap.servers': st.bootstrap})\n"
        "    for i in range(3):\n"
        "        p.produce('t', value=str(i).encode())\n"
        "    assert p.flush(10) == 0\n"
        "    c = Consumer({'bootstrap.servers': st.bootstrap, 'group.id': 'g', 'auto.offset.reset': 'earliest'})\n"
        "    c.subscribe(['t'])\n"
        "    got, deadline = [], time.monotonic() + 30\n"
        "    while len(got) < 3 and time.monotonic() < deadline:\n"
        "        m = c.poll(0.2)\n"
        "        if m is not None and not m.error():\n"
        "            got.append(m.value())\n"
        "    c.commit(asynchronous=False)\n"
        "    assert got == [b'0', b'1', b'2'], got\n"
        "    assert SHARE not in sys.modules and PROTOCOL not in sys.modules\n"
        "    view = st.group('g')\n"
        "    assert list(view.assignments.values()) == [{'t': [0]}], view\n"
        "    assert SHARE not in sys.modules and PROTOCOL in sys.modules\n"
        "    c.close()\n"
        "    s = ShareConsumer({'bootstrap.servers': st.bootstrap, 'group.id': 'sg'})\n"
        "    s.subscribe(['t'])\n"
        "    p.produce('t', value=b'3')\n"
        "    assert p.flush(10) == 0\n"
        "    shared, deadline = [], time.monotonic() + 30\n"
        "    while not shared and time.monotonic() < deadline:\n"
        "        shared += [m.value() for m in s.poll(0.2) if not m.error()]\n"
        "        if not shared:\n"
        "            p.produce('t', value=b'more')\n"
        "            p.flush(10)\n"
        "    s.close()\n"
        "    assert shared and SHARE in sys.modules, shared\n"
        "finally:\n"
        "    st.stop()",
        "-W", "error")


# kafka-python 3 pinned to a 0.10 broker (Produce v2 with message format v1, Fetch v2), in a process of its own
OLD_CLIENT = """
import json, sys
from kafka import KafkaConsumer, KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], api_version=(0, 10))
for i in range(3):
    p.send('t', str(i).encode())
p.flush(); p.close()
c = KafkaConsumer('t', bootstrap_servers=sys.argv[1], api_version=(0, 10), auto_offset_reset='earliest',
                  consumer_timeout_ms=10000)
print(json.dumps([m.value.decode() for _, m in zip(range(4), c)]))
c.close()
"""


def test_the_old_message_formats_are_imported_when_a_real_client_first_uses_them():
    """A ServerThread presenting Kafka 2.8 (a process run with `-W error`): kafka-python's old message formats are
    not imported, nor by a producer of today's format (confluent-kafka). kafka-python pinned to a 0.10 broker, in
    a process of its own, produces - the server converts its messages to a v2 batch, which imports them - and
    reads every message back, converted down."""
    _modules_after(
        "import json, subprocess, sys, tenure.server\n"
        "from confluent_kafka import Producer\n"
        "OLD = ('kafka.record.memory_records', 'kafka.record.legacy_records')\n"
        "st = tenure.server.ServerThread(port=0, kafka_version='2.8').start()\n"
        "try:\n"
        "    p = Producer({'bootstrap.servers': st.bootstrap})\n"
        "    p.produce('t', value=b'new')\n"
        "    assert p.flush(10) == 0\n"
        "    assert not any(m in sys.modules for m in OLD)\n"
        f"    out = subprocess.run([sys.executable, '-c', {OLD_CLIENT!r}, st.bootstrap], capture_output=True,\n"
        "                         text=True, timeout=60)\n"
        "    assert out.returncode == 0, out.stderr\n"
        "    assert json.loads(out.stdout.splitlines()[-1]) == ['new', '0', '1', '2'], out.stdout\n"
        "    assert all(m in sys.modules for m in OLD)\n"
        "finally:\n"
        "    st.stop()",
        "-W", "error")


def test_kafka_pythons_packages_imported_without_their_init_are_attributes_of_their_parents():
    """A package tenure imports without running its `__init__` (`kafka.record`, kafka-python's API packages) is
    bound on its parent, as the import system binds a submodule: `import kafka.record` then `kafka.record.X` works,
    the package's `__init__` running at the first name it alone defines."""
    _modules_after("import sys, tenure.server\n"
                   "import kafka.record, kafka.protocol.admin\n"
                   "assert 'kafka.record.memory_records' not in sys.modules\n"
                   "assert kafka.record is sys.modules['kafka.record']\n"
                   "assert kafka.record.MemoryRecords.__module__ == 'kafka.record.memory_records'\n"
                   "assert kafka.protocol.admin.DescribeConfigsRequest.__name__ == 'DescribeConfigsRequest'\n"
                   "from kafka.record import MemoryRecordsBuilder\n"
                   "assert MemoryRecordsBuilder is kafka.record.MemoryRecordsBuilder", "-W", "error")


def test_a_server_in_memory_reads_batches_with_the_segment_reader_at_its_first_load_of_records():
    """A 2-broker ServerThread in memory (a process run with `-W error`) loads its empty __consumer_offsets
    partitions without importing the reader of a batch's records; confluent-kafka commits in a group, the group's
    coordinator moves to the other broker, whose load reads the partition's batches (the reader imported then),
    and a new consumer of the group finds the committed offset there."""
    _modules_after(
        "import sys, tenure.server\n"
        "from confluent_kafka import Consumer, TopicPartition\n"
        "st = tenure.server.ServerThread(port=0, brokers=2).start()\n"
        "try:\n"
        "    st.create_topics({'t': 1})\n"
        "    assert 'tenure.storage.reader' not in sys.modules\n"
        "    c = Consumer({'bootstrap.servers': st.bootstrap, 'group.id': 'g', 'enable.auto.commit': False})\n"
        "    c.commit(offsets=[TopicPartition('t', 0, 7)], asynchronous=False)\n"
        "    c.close()\n"
        "    assert 'tenure.storage.reader' not in sys.modules\n"
        "    st.move_coordinator('g', 1 - st.coordinator_of('g'))\n"
        "    assert 'tenure.storage.reader' in sys.modules\n"
        "    c = Consumer({'bootstrap.servers': st.bootstrap, 'group.id': 'g'})\n"
        "    assert [p.offset for p in c.committed([TopicPartition('t', 0)], timeout=30)] == [7]\n"
        "    c.close()\n"
        "finally:\n"
        "    st.stop()",
        "-W", "error")


def test_a_transaction_marker_is_the_transaction_coordinators_class_named_by_the_markers_module_too():
    """The class of a marker the transaction coordinator asks for is made with the coordinator's records
    (protocol/txn_records.py), which `import tenure.server` leaves out; `tenure.protocol.markers` names it as well
    (imported then), and an unknown name there is still an AttributeError (-W error)."""
    _modules_after("import sys, tenure.server\n"
                   "import tenure.protocol.markers as markers\n"
                   "assert 'tenure.protocol.txn_records' not in sys.modules\n"
                   "from tenure.protocol.markers import TxnMarker\n"
                   "from tenure.protocol.txn_records import TxnMarker as made\n"
                   "assert TxnMarker is made is markers.TxnMarker\n"
                   "m = TxnMarker('tx', 't', 0, 5, 1, True)\n"
                   "assert (m.coordinator_epoch, m) == (0, TxnMarker('tx', 't', 0, 5, 1, True))\n"
                   "try:\n"
                   "    markers.NoSuchName\n"
                   "except AttributeError as exc:\n"
                   "    assert 'NoSuchName' in str(exc)\n"
                   "else:\n"
                   "    raise AssertionError('an unknown name must raise AttributeError')", "-W", "error")


def test_a_deferred_module_is_imported_once_on_first_use_even_by_threads_at_once():
    _modules_after(
        "import sys, threading\n"
        "from tenure.deferred import deferred\n"
        "d = deferred('tenure.storage.compaction')\n"
        "assert 'tenure.storage.compaction' not in sys.modules and 'not imported yet' in repr(d)\n"
        "got, errors = [], []\n"
        "def use():\n"
        "    try:\n"
        "        got.append(d.Compactor)\n"
        "    except Exception as exc:\n"
        "        errors.append(exc)\n"
        "ts = [threading.Thread(target=use) for _ in range(16)]\n"
        "[t.start() for t in ts]\n"
        "[t.join() for t in ts]\n"
        "import tenure.storage.compaction as real\n"
        "assert errors == [] and set(got) == {real.Compactor} and len(got) == 16, (errors, got)\n"
        "assert d.module is real and 'imported' in repr(d) and 'not' not in repr(d)\n"
        "try:\n"
        "    d.NoSuchName\n"
        "except AttributeError as exc:\n"
        "    assert 'NoSuchName' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('an unknown name must raise AttributeError')\n"
        "try:\n"
        "    deferred('tenure.no_such_module').x\n"
        "except ModuleNotFoundError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('a module that is not there must raise on first use')\n"
        "assert deferred('tenure.protocol.share_state_records').ShareStateRecord",
        "-W", "error")


def test_the_import_holds_automatic_collection_off_and_leaves_it_as_it_was():
    """`import tenure.server` runs with automatic garbage collection off (no young collection walks what it makes:
    with it on, the import set off ~75) and leaves it on when it was on, off when the importer had turned it off."""
    _modules_after("import gc\n"
                   "before = [g['collections'] for g in gc.get_stats()]\n"
                   "import tenure.server\n"
                   "after = [g['collections'] for g in gc.get_stats()]\n"
                   "assert gc.isenabled() and after[0] - before[0] <= 5 and after[1:] == before[1:], (before, after)\n"
                   "from tenure import gcpause\n"
                   "assert not gcpause.paused()")
    _modules_after("import gc\ngc.disable()\nimport tenure.server\nassert not gc.isenabled()")


def test_tenure_serves_imports_hold_automatic_collection_off_and_leave_it_as_it_was():
    """What `tenure serve` imports before its server (the command line's modules; `tenure.protocol`, whose
    kafka-python codecs `tenure.config` and `tenure.tools` import first) runs with automatic collection off too
    (~40 young collections with it on), and each leaves it as the importer had it."""
    for module in ("tenure.tools.cli", "tenure.protocol", "tenure.config"):
        _modules_after("import gc\n"
                       "before = [g['collections'] for g in gc.get_stats()]\n"
                       f"import {module}\n"
                       "after = [g['collections'] for g in gc.get_stats()]\n"
                       "assert gc.isenabled() and after[0] - before[0] <= 5 and after[1:] == before[1:], "
                       "(before, after)\n"
                       "from tenure import gcpause\n"
                       "assert not gcpause.paused()")
        _modules_after(f"import gc\ngc.disable()\nimport {module}\nassert not gc.isenabled()")


# The dataclasses `import tenure.server` builds: each one's methods (__init__, __repr__, __eq__, __hash__, a frozen
# one's __setattr__/__delattr__) are generated and compiled when its module is imported, 0.2-3 ms a class and about a
# fifth of the import; one without a docstring of its own also gets one made with inspect.signature then. A class
# whose users only read and set its fields is a plain class with __slots__ (docs/benchmarks.md, "Start-up to
# ready"). A new dataclass on the import path raises the ceiling with a reason, and has a docstring.
MAX_DATACLASSES_AT_IMPORT = 31


def test_import_tenure_server_builds_few_dataclasses_each_with_a_docstring():
    out = subprocess.run([sys.executable, "-c", """
import dataclasses, json
built, undocumented = [], []
process = dataclasses._process_class
def counted(cls, *args):
    name = f"{cls.__module__}.{cls.__qualname__}"
    built.append(name)
    if cls.__dict__.get("__doc__") is None:
        undocumented.append(name)
    return process(cls, *args)
dataclasses._process_class = counted
import tenure.server
print(json.dumps([built, undocumented]))
"""], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    built, undocumented = json.loads(out.stdout.strip().splitlines()[-1])
    assert "tenure.config.ServerConfig" in built                    # (the count is of what it should count)
    assert len(built) <= MAX_DATACLASSES_AT_IMPORT, f"{len(built)} dataclasses built at import: {sorted(built)}"
    assert undocumented == [], sorted(undocumented)


# what a started server with a SASL listener has not imported until a client needs it: the SASL servers (at a SASL
# listener's first connection; the OAUTHBEARER validator is made at start, where it checks its settings), OpenSSL's
# hashes (imported where a SCRAM credential is made or checked: security/users.py, sasl.py)
# and the IDNA codec (the listeners' ASCII addresses are resolved as bytes: tenure/server/listener.py)
NOT_AT_START = ("tenure.security.sasl", "hashlib", "hmac", "secrets", "_hashlib",
                "encodings.idna", "stringprep", "unicodedata")


def test_a_started_server_imports_no_sasl_server_nor_hash_nor_the_idna_codec_until_a_client_authenticates():
    """A ServerThread with a PLAINTEXT and a SASL_PLAINTEXT listener (a process run with `-W error`), started: none
    of NOT_AT_START is imported. Then a user is added through the thread's control and kafka-python 3
    authenticates with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN (the server salts, hashes and checks with the modules
    imported then) and produces."""
    _modules_after(
        "import sys, tenure.server\n"
        f"NOT_AT_START = {NOT_AT_START!r}\n"
        "st = tenure.server.ServerThread(port=0, listeners=['PLAINTEXT', 'SASL_PLAINTEXT']).start()\n"
        "try:\n"
        "    loaded = [m for m in NOT_AT_START if m in sys.modules]\n"
        "    assert loaded == [], loaded\n"
        "    st.add_user('alice', 'alice-pw')\n"
        "    from kafka import KafkaProducer\n"
                "    for mechanism in ('SCRAM-SHA-512', 'SCRAM-SHA-256', 'PLAIN'):\n"
        "        conf = st.client_settings('SASL_PLAINTEXT', 'alice', mechanism=mechanism,\n"
        "                                  password='alice-pw').kafka_python()\n"
        "        p = KafkaProducer(**conf)\n"
        "        p.send('t', b'v').get(timeout=15)\n"
        "        p.close()\n"
        "    assert 'tenure.security.sasl' in sys.modules\n"
        "    in_memory = [m for m in ('tenure.storage.datadir', 'tenure.storage.segments') if m in sys.modules]\n"
        "    assert in_memory == [], in_memory       # (a server without --data-dir never opens one)\n"
        "finally:\n"
        "    st.stop()",
        "-W", "error")


def test_tenure_serve_in_memory_imports_no_data_dir_module_and_still_names_a_locked_data_dir(tmp_path):
    """The command line's `serve` (run through main()) in a fresh process: a server whose --data-dir another server
    holds exits 1 naming the flag, as before, the data dir's modules imported for it; the errors it names are the
    storage layer's own classes."""
    held = tmp_path / "held"
    _modules_after(
        "import contextlib, io, sys\n"
        "from tenure.tools import cli\n"
        "assert 'tenure.storage.datadir' not in sys.modules and 'tenure.storage.segments' not in sys.modules\n"
        "from tenure.server import ServerThread\n"
        f"st = ServerThread(port=0, data_dir={str(held)!r}).start()\n"
        "try:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        f"        code = cli.main(['serve', '--port', '0', '--no-admin', '--data-dir', {str(held)!r}])\n"
        "    assert code == 1 and 'stop that process or give another --data-dir' in err.getvalue(), (code, err.getvalue())\n"
        "finally:\n"
        "    st.stop()\n"
        "from tenure.storage import datadir, segments\n"
        "assert cli.datadir.DataDirLocked is datadir.DataDirLocked\n"
        "assert cli.recovery.CorruptLogError is segments.CorruptLogError", "-W", "error")


def test_tenure_serve_imports_the_admin_endpoint_off_the_loop_after_binding_its_socket(tmp_path):
    """`tenure serve` with the admin endpoint (through main(), a fresh process): before it is ready it binds the
    endpoint's socket with tenure/control/admin_socket.py only; the endpoint's modules (http_server.py, the table
    of controls its routes come from, aiohttp.web) are imported on the admin import thread, and then the endpoint
    answers. Neither socket's address brings in the IDNA codec."""
    ready, seen = tmp_path / "ready.json", tmp_path / "seen.json"
    _modules_after(
        "import json, os, signal, sys, threading, time, urllib.request\n"
        "WATCHED = ('tenure.control.http_server', 'tenure.control.registry', 'aiohttp.web')\n"
        "where = {}\n"
        "class Watch:\n"
        "    @staticmethod\n"
        "    def find_spec(name, path=None, target=None):\n"
        "        if name in WATCHED or name == 'encodings.idna':\n"
        "            where.setdefault(name, threading.current_thread().name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Watch)\n"
        "def watch():\n"
        f"    while not os.path.exists({str(ready)!r}) or 'aiohttp.web' not in sys.modules or any(\n"
        "            t.name == 'tenure-admin-import' for t in threading.enumerate()):\n"
        "        time.sleep(0.02)\n"
        f"    admin = json.load(open({str(ready)!r}))['admin']\n"
        "    deadline = time.monotonic() + 10\n"
        "    while True:\n"
        "        try:\n"
        "            body = urllib.request.urlopen(f'http://{admin}/health', timeout=5).read()\n"
        "            break\n"
        "        except OSError:\n"
        "            assert time.monotonic() < deadline\n"
        "            time.sleep(0.05)\n"
        f"    json.dump({{'where': where, 'health': json.loads(body)}}, open({str(seen)!r}, 'w'))\n"
        "def stop():\n"
        "    try:\n"
        "        watch()\n"
        "    finally:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "threading.Thread(target=stop, daemon=True).start()\n"
        "from tenure.tools.cli import main\n"
        f"assert main(['serve', '--port', '0', '--admin-port', '0', '--ready-file', {str(ready)!r}]) == 0\n")
    got = json.loads(seen.read_text())
    assert got["health"] == {"status": "ok"}
    where = got["where"]
    assert {where.get(m) for m in ("tenure.control.http_server", "tenure.control.registry", "aiohttp.web")} == {
        "tenure-admin-import"}, where
    assert "encodings.idna" not in where or where["encodings.idna"] != "MainThread", where


def test_a_server_stopped_while_its_admin_modules_are_imported_waits_for_them_and_exits_cleanly(tmp_path):
    """`tenure serve` stopped (SIGTERM) right after its ready line, while the admin endpoint's modules (aiohttp's C
    extensions among them) are still imported on their thread: the stop waits for that import and the process
    exits 0 every time (it exited on SIGSEGV 4 times in 40 when the interpreter finalized under the import)."""
    import time

    from tests.support.procs import TenureProcess
    for i in range(8):
        srv = TenureProcess(tmp_path / f"data{i}", fsync="batch", stderr_path=tmp_path / "server.log")
        with srv:
            srv.start()
            time.sleep(0.02 * (i % 4))                                      # a few moments into the import
            assert srv.terminate() == 0, srv.stderr()


def test_the_stop_waits_for_an_import_thread_still_running(tmp_path):
    """`imports_done` waits for the import threads still running (within its bound): a module that takes 0.3 s to
    import is imported when the wait returns."""
    _modules_after(
        "import asyncio, sys, time\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        f"open({str(tmp_path / 'slow_mod.py')!r}, 'w').write('import time\\ntime.sleep(0.3)\\nDONE = True\\n')\n"
        "from tenure.control.admin_socket import import_in_thread, imports_done\n"
        "async def main():\n"
        "    fut = import_in_thread('slow_mod')\n"
        "    t0 = time.monotonic()\n"
        "    await imports_done(5)\n"
        "    assert 'slow_mod' in sys.modules and sys.modules['slow_mod'].DONE and time.monotonic() - t0 >= 0.2\n"
        "    assert (await fut).DONE\n"
        "    t0 = time.monotonic()\n"
        "    await imports_done(5)                    # none running: at once\n"
        "    assert time.monotonic() - t0 < 0.1\n"
        "asyncio.run(main())")
