"""ACLs from outside the Kafka protocol: the `acls` / `add_acl` / `remove_acl` controls as ServerThread methods,
admin routes and `tenure acl list|add|remove`, all over the one table the authorizer checks (an ACL added this
way refuses a confluent-kafka producer at once)."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tenure.tools.cli import main
from tests.integration.test_acls import produce
from tests.integration.test_admin_guard import call as raw_call

pytestmark = pytest.mark.timeout(120)


def call(port: int, method: str, path: str, body=None):
    return raw_call(port, method, path, body, {"Content-Type": "application/json"} if body is not None else None)


@pytest.fixture(scope="module")
def server():
    with ServerThread(ServerConfig(port=0, admin_port=0, allow_everyone_if_no_acl=True)) as s:
        yield s


def test_method_route_and_subcommand_share_one_table(server, capsys):
    admin = ["--admin", server.server.admin_address]
    assert server.add_acl("allow User:alice read topic:orders") == "allow User:alice read topic:orders"
    status, body = call(server.admin_port, "POST", "/acls", {"acl": "deny bob write topic:prefixed:logs- from 10.0.0.1"})
    assert (status, body) == (201, {"acl": "deny User:bob write topic:prefixed:logs- from 10.0.0.1"})
    assert main(["acl", "add", "allow User:* describe group:g", *admin]) == 0
    capsys.readouterr()
    assert main(["acl", "list", *admin]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == server.acls() == ["deny User:bob write topic:prefixed:logs- from 10.0.0.1",    # sorted:
                                       "allow User:alice read topic:orders",                        # type, name
                                       "allow User:* describe group:g"]
    assert main(["acl", "remove", "allow User:* describe group:g", *admin]) == 0
    assert server.remove_acl("allow User:alice read topic:orders") == ["allow User:alice read topic:orders"]
    assert server.remove_acl("allow User:alice read topic:orders") == []
    assert server.acls() == ["deny User:bob write topic:prefixed:logs- from 10.0.0.1"]
    server.remove_acl("deny User:bob write topic:prefixed:logs- from 10.0.0.1")


def test_bad_acl_text_is_refused_with_its_reason(server, capsys):
    status, body = call(server.admin_port, "POST", "/acls", {"acl": "allow User:a fly topic:t"})
    assert status == 400 and "unknown operation 'fly'" in body["message"]
    assert main(["acl", "add", "allow User:a read cluster:other", "--admin", server.server.admin_address]) == 1
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in capsys.readouterr().err
    status, body = call(server.admin_port, "POST", "/acls", {"acl": 7})
    assert status == 400


def test_an_acl_added_through_the_endpoint_refuses_a_real_producer(server):
    assert produce(server.bootstrap, "ctl-t") is None          # no ACL names it: open (allow-everyone)
    call(server.admin_port, "POST", "/acls", {"acl": "deny User:ANONYMOUS write topic:ctl-t"})
    err = produce(server.bootstrap, "ctl-t")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    server.remove_acl("deny User:ANONYMOUS write topic:ctl-t")
    assert produce(server.bootstrap, "ctl-t") is None


def test_without_an_authorizer_the_controls_say_so(capsys):
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        status, body = call(s.admin_port, "GET", "/acls")
        assert status == 409 and body["error"] == "SECURITY_DISABLED"
        assert main(["acl", "list", "--admin", s.server.admin_address]) == 1
        assert "SECURITY_DISABLED" in capsys.readouterr().err


def test_reset_keeps_only_the_configured_acls(tmp_path):
    """The pytest plugin's session scope resets the server between tests: ACLs a test added go, the ones the
    configuration names are created again."""
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path), acls=("allow User:* read topic:base",))) as s:
        s.add_acl("deny User:eve read topic:base")
        s.restart()
        assert s.acls() == ["allow User:* read topic:base", "deny User:eve read topic:base"]
        s.reset()
        assert s.acls() == ["allow User:* read topic:base"]


def test_tenure_serve_refuses_a_bad_acl_flag_naming_it():
    from tenure.tools.cli import _config, _parser
    with pytest.raises(SystemExit, match=r"tenure: --acl 'allow x fly topic:t': unknown operation 'fly'"):
        _config(_parser().parse_args(["serve", "--no-admin", "--acl", "allow x fly topic:t"]))
    got = _config(_parser().parse_args(["serve", "--no-admin", "--super-user", "ops", "--acl", "deny User:* read group:g"]))
    assert (got.acls_checked, got.super_users, got.acls) == (True, ("ops",), ("deny User:* read group:g",))
