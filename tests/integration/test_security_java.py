"""Java kafka-clients 4.3 over secured listeners (tests/java/SecureClients.java): produce, consume as a static member
of a group and commit over SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN, SSL with a client certificate
and SASL_SSL with OAUTHBEARER (Kafka's unsecured tokens); a wrong password is Java's SaslAuthenticationException at
once; past the session lifetime (connections.max.reauth.ms) Java re-authenticates (KIP-368) and keeps its group
membership."""
from __future__ import annotations

import pytest

from tests.support.java import run_java

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]
N = 5
# fast, light JVMs, as tests/integration/test_static_java.py starts them (run_java takes the environment's options)
JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto"


@pytest.fixture(autouse=True)
def _light_jvms(monkeypatch):
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", JVM_OPTS)
SECURE = pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT", "SSL"],
                            users={"alice": "alice-secret"}, ssl_client_auth="required",
                            initial_rebalance_delay_ms=0)


def java_conf(settings) -> list[str]:
    props = settings.java()
    bootstrap = props.pop("bootstrap.servers")
    return [bootstrap, *(f"{k}={v}" for k, v in props.items())]


def run_client(settings, topic: str, group: str, instance: str, count: int = N, stay_ms: int = 0,
               check: bool = True) -> list[dict]:
    bootstrap, *conf = java_conf(settings)
    return run_java("SecureClients", bootstrap, topic, group, instance, count, stay_ms, *conf, check=check)


@SECURE
@pytest.mark.parametrize("listener,mechanism,cert", [("SASL_SSL", "SCRAM-SHA-512", None),
                                                     ("SASL_PLAINTEXT", "PLAIN", None), ("SSL", None, "alice"),
                                                     ("SASL_SSL", "OAUTHBEARER", None)])
def test_java_produces_consumes_in_a_static_group_and_commits(tenure_server, listener, mechanism, cert):
    settings = tenure_server.client_settings(listener, "alice" if mechanism else None, mechanism=mechanism, cert=cert)
    topic, group = f"j-{listener}-{mechanism}", f"jg-{listener}-{mechanism}"
    lines = run_client(settings, topic, group, "j-1")
    done = lines[-1]
    assert done["type"] == "done" and done["consumed"] == N and done["assigned"] == 1, lines
    g = tenure_server.group(group)
    assert g.member("j-1") is not None and g.offset(topic, 0) == N
    if mechanism:
        auth = tenure_server.metrics.authentications
        assert auth[(listener, mechanism, "authenticated")] >= 3 and not any(o == "failed" for *_, o in auth)


@SECURE
def test_java_wrong_password_is_a_sasl_authentication_exception_at_once(tenure_server):
    wrong = tenure_server.client_settings("SASL_SSL", "alice", password="wrong")
    lines = run_client(wrong, "t", "g", "i", count=-1, check=False)
    (err,) = [ln for ln in lines if ln["type"] == "error"]
    assert err["exception"] == "org.apache.kafka.common.errors.SaslAuthenticationException"
    assert err["message"] == ("Authentication failed during authentication due to invalid credentials with SASL "
                              "mechanism SCRAM-SHA-512")
    # at once: not after the Admin's 15 s default.api.timeout.ms (Java does not retry an authentication error)
    assert err["elapsed_ms"] < 5000, err
    # the server goes on: the right password works
    from confluent_kafka.admin import AdminClient
    assert AdminClient(tenure_server.client_settings("SASL_SSL", "alice").confluent()).list_topics(timeout=10)


@pytest.mark.tenure(listeners=["SASL_SSL"], users={"alice": "alice-secret"}, initial_rebalance_delay_ms=0,
                    connections_max_reauth_ms=2000)
def test_java_reauthenticates_past_the_session_lifetime_and_keeps_its_membership(tenure_server):
    settings = tenure_server.client_settings("SASL_SSL", "alice")
    lines = run_client(settings, "reauth", "reauth-g", "r-1", stay_ms=5000)     # two and a half lifetimes
    done = lines[-1]
    assert done["type"] == "done", lines
    assert done["generation_end"] == done["generation_start"] and done["assigned"] == 1
    auth = tenure_server.metrics.authentications
    assert auth[("SASL_SSL", "SCRAM-SHA-512", "reauthenticated")] >= 2, auth
    assert tenure_server.metrics.closed_connections["sasl_session_expired"] == 0
    g = tenure_server.group("reauth-g")
    assert g.generation == done["generation_start"] and g.member("r-1").member_id == done["member_id"]
    assert g.rebalances == 1


@SECURE
def test_java_admin_alters_and_describes_scram_credentials_and_the_user_authenticates(tenure_server):
    admin = tenure_server.client_settings("SASL_SSL", "alice")
    lines = run_client(admin, "kai", "kai-secret", "-", count=-2)
    assert lines[-1] == {"type": "scram", "user": "kai",
                         "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}
    from confluent_kafka.admin import AdminClient
    conf = tenure_server.client_settings("SASL_SSL", "kai", password="kai-secret").confluent()
    assert AdminClient(conf).list_topics(timeout=10).brokers
