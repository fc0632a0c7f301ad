"""SCRAM users through Kafka's APIs and tenure's controls: confluent-kafka's and Java's Admin alter and describe
SCRAM credentials (AlterUserScramCredentials carries a salted password, never the password) and the new user
authenticates; users added and removed through the admin endpoint and `tenure users`; users kept in the data dir
across a restart."""
from __future__ import annotations

import time

import pytest

SASL = pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_PLAINTEXT"], users={"admin": "admin-secret"})


def can_authenticate(server, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """Whether a confluent-kafka client authenticates: Metadata answered, or its authentication error (at once)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    errors: list = []
    conf = server.client_settings("SASL_PLAINTEXT", user, mechanism=mechanism, password=password).confluent()
    admin = AdminClient({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.3)
            return True
        except Exception:
            admin.poll(0)
            if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
                return False
    raise AssertionError(f"neither authenticated nor refused: {errors}")


@SASL
def test_confluent_admin_alters_and_describes_scram_credentials(tenure_server):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient(tenure_server.client_settings("SASL_PLAINTEXT", "admin").confluent())
    upsert = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"erin-pw")
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(10)
    described = {u: f.result(10) for u, f in admin.describe_user_scram_credentials(["erin"]).items()}
    infos = described["erin"].scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    assert can_authenticate(tenure_server, "erin", "erin-pw")
    assert not can_authenticate(tenure_server, "erin", "erin-pw", "SCRAM-SHA-512")   # no SHA-512 credential
    assert can_authenticate(tenure_server, "erin", "erin-pw", "PLAIN")               # PLAIN checks the one it has
    # errors: an unknown user to describe, a credential that does not exist to delete
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    gone = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.alter_user_scram_credentials([gone])["erin"].result(10)
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)])[
        "erin"].result(10)
    assert not can_authenticate(tenure_server, "erin", "erin-pw")
    too_few = UserScramCredentialUpsertion("fay", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000), b"x")
    with pytest.raises(Exception, match="UNACCEPTABLE_CREDENTIAL|iterations"):
        admin.alter_user_scram_credentials([too_few])["fay"].result(10)


@SASL
def test_users_through_the_thread_controls(tenure_server):
    tenure_server.add_user("gus", "gus-pw")
    assert "gus" in {u["name"] for u in tenure_server.users()}
    assert can_authenticate(tenure_server, "gus", "gus-pw", "SCRAM-SHA-512")
    assert tenure_server.remove_user("gus") is True
    assert not can_authenticate(tenure_server, "gus", "gus-pw", "SCRAM-SHA-512")


@pytest.mark.tenure(listeners=["SASL_PLAINTEXT"], data_dir=True)
def test_users_are_kept_in_the_data_dir_across_a_restart(tenure_server):
    tenure_server.add_user("hal", "hal-pw")
    tenure_server.restart()
    assert can_authenticate(tenure_server, "hal", "hal-pw", "SCRAM-SHA-512")


@pytest.mark.tenure(listeners=["SASL_PLAINTEXT"], users={"admin": "admin-secret"}, admin_port=0)
def test_tenure_users_cli_through_the_admin_endpoint(tenure_server, capsys):
    from tenure.tools.cli import main
    admin = tenure_server.server.admin_address
    assert main(["users", "add", "ivy", "ivy-pw", "--admin", admin]) == 0
    assert main(["users", "list", "--admin", admin]) == 0
    out = capsys.readouterr().out
    assert "ivy\tSCRAM-SHA-256 (4096 iterations), SCRAM-SHA-512 (4096 iterations)" in out and "ivy-pw" not in out
    assert can_authenticate(tenure_server, "ivy", "ivy-pw", "PLAIN")
    assert main(["users", "remove", "ivy", "--admin", admin]) == 0
    assert main(["users", "remove", "ivy", "--admin", admin]) == 1          # 404: no such user
    assert not can_authenticate(tenure_server, "ivy", "ivy-pw", "PLAIN")


@pytest.mark.tenure(listeners=["SSL", "SASL_PLAINTEXT"], users={"admin": "admin-secret"}, ssl_client_auth="required")
def test_connections_show_each_principal(tenure_server):
    from confluent_kafka import Producer
    a = Producer(tenure_server.client_settings("SSL", cert="jo").confluent())
    b = Producer(tenure_server.client_settings("SASL_PLAINTEXT", "admin").confluent())
    for p in (a, b):
        p.produce("c", b"x")
        assert p.flush(15) == 0
    seen = {(c["listener"], c["principal"]) for c in tenure_server.connections()}
    assert ("SSL", "User:CN=jo,OU=tenure client,O=tenure") in seen
    assert ("SASL_PLAINTEXT", "User:admin") in seen
