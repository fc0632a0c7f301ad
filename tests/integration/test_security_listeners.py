"""Listeners as Kafka has them: several per broker, each broker of a cluster with each of them, Metadata and
FindCoordinator answering with the addresses of the listener a request came in on (custom names through the
security-protocol map); a restart keeps the ports and the CA; `tenure serve --listener ... --ready-file` names each
listener's bootstrap and the CA file."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.integration.test_admin_cli import READY


@pytest.mark.tenure(brokers=3, listeners=["PLAINTEXT", "EXTERNAL"], listener_security_protocol_map="EXTERNAL:SASL_SSL",
                    users={"alice": "alice-secret"}, initial_rebalance_delay_ms=0)
def test_each_broker_has_each_listener_and_clients_stay_on_theirs(tenure_server):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    listeners = tenure_server.listeners
    assert set(listeners) == {"PLAINTEXT", "EXTERNAL"}
    plain, external = (set(listeners[n].split(",")) for n in ("PLAINTEXT", "EXTERNAL"))
    assert len(plain) == len(external) == 3 and not plain & external
    for name, want in (("PLAINTEXT", plain), ("EXTERNAL", external)):
        conf = tenure_server.client_settings(name, "alice").confluent()
        md = AdminClient(conf).list_topics(timeout=10)
        assert {f"{b.host}:{b.port}" for b in md.brokers.values()} == want
    conf = tenure_server.client_settings("EXTERNAL", "alice").confluent()
    assert conf["security.protocol"] == "sasl_ssl"
    p = Producer(conf)
    p.produce("ext", b"v")
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": "ext-g", "group.instance.id": "e-1", "auto.offset.reset": "earliest"})
    c.subscribe(["ext"])                                      # FindCoordinator on EXTERNAL: an EXTERNAL address
    deadline, m = time.time() + 30, None
    while m is None and time.time() < deadline:
        m = c.poll(0.5)
    assert m is not None and m.error() is None
    c.commit(asynchronous=False)
    coordinator = tenure_server.coordinator_of("ext-g")
    assert tenure_server.group("ext-g").offset("ext", 0) == 1
    assert {x["listener"] for x in tenure_server.connections() if x["broker"] == coordinator} >= {"EXTERNAL"}
    assert all(x["listener"] == "EXTERNAL" for x in tenure_server.connections())
    c.close()


@pytest.mark.tenure(listeners=["SASL_SSL", "SSL"], users={"alice": "alice-secret"})
def test_a_restart_keeps_the_ports_and_the_ca(tenure_server):
    from confluent_kafka import Producer
    before, ca = tenure_server.listeners, open(tenure_server.ca_file).read()
    p = Producer(tenure_server.client_settings("SASL_SSL", "alice").confluent())
    p.produce("r", b"1")
    assert p.flush(15) == 0
    tenure_server.restart()
    assert tenure_server.listeners == before and open(tenure_server.ca_file).read() == ca
    p.produce("r", b"2")                                      # the client reconnects and trusts the same CA
    assert p.flush(30) == 0


def test_tenure_serve_ready_file_names_the_listeners_and_the_ca(tmp_path):
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--no-admin", "--ready-file", str(ready),
                             "--listener", "PLAINTEXT://127.0.0.1:0", "--listener", "SASL_SSL://127.0.0.1:0",
                             "--user", "alice:alice-secret", "--tls-dir", str(tmp_path / "tls")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        m = READY.match(proc.stdout.readline().rstrip("\n"))
        assert m, proc.stderr.read() if proc.poll() is not None else "no ready line"
        info = json.loads(ready.read_text())
        assert set(info["listeners"]) == {"PLAINTEXT", "SASL_SSL"}
        assert info["bootstrap"] == info["listeners"]["PLAINTEXT"] == f"127.0.0.1:{m.group(2)}"
        assert info["ca_file"] == str(tmp_path / "tls" / "ca.pem")
        from confluent_kafka.admin import AdminClient
        conf = {"bootstrap.servers": info["listeners"]["SASL_SSL"], "security.protocol": "sasl_ssl",
                "ssl.ca.location": info["ca_file"], "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                "sasl.password": "alice-secret"}
        md = AdminClient(conf).list_topics(timeout=10)
        assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [info["listeners"]["SASL_SSL"]]
        proc.terminate()
        assert proc.wait(15) == 0
        assert "TLS: generated a server certificate" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("argv,message", [
    (["--listener", "WEIRD://:0"], "WEIRD is not a security protocol"),
    (["--user", "nopassword"], "expected NAME:PASSWORD"),
    (["--listener", "SSL://:0", "--ssl-key-file", "/nonexistent"], "--ssl-key-file needs --ssl-cert-file"),
    (["--listener", "SSL://:0", "--ssl-cert-file", "/nonexistent.pem"], "No such file"),
    (["--sasl-mechanisms", "PLAIN,GSSAPI"], "--sasl-mechanisms: GSSAPI"),
    (["--listener", "SASL_SSL://:0", "--oauth-jwks-file", "/nonexistent.json"], "--oauth-jwks-file /nonexistent.json"),
])
def test_tenure_serve_refuses_bad_security_flags_with_a_message(argv, message):
    out = subprocess.run([sys.executable, "-m", "tenure", "serve", "--port", "0", "--no-admin", *argv],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_given_certificate_files_and_client_certificates_of_the_users_ca(tmp_path):
    """--ssl-cert-file/--ssl-key-file/--ssl-ca-file: the server presents the user's certificate; client
    certificates signed by the given CA are accepted, with their subject as the principal."""
    import trustme
    from confluent_kafka import Producer

    from tenure.security.tls import pkcs8
    from tenure.server import ServerThread
    ca = trustme.CA(organization_name="Test Org")
    server_cert = ca.issue_cert("localhost", "127.0.0.1")
    cert, key, ca_file = tmp_path / "s.pem", tmp_path / "s-key.pem", tmp_path / "ca.pem"
    cert.write_bytes(b"".join(b.bytes() for b in server_cert.cert_chain_pems))
    key.write_bytes(pkcs8(server_cert.private_key_pem.bytes()))
    ca.cert_pem.write_to_path(str(ca_file))
    client = ca.issue_cert("client.example", common_name="kim", organization_name="Test Org")
    ccert, ckey = tmp_path / "c.pem", tmp_path / "c-key.pem"
    ccert.write_bytes(b"".join(b.bytes() for b in client.cert_chain_pems))
    client.private_key_pem.write_to_path(str(ckey))
    with ServerThread(listeners=("SSL",), ssl_cert_file=str(cert), ssl_key_file=str(key), ssl_ca_file=str(ca_file),
                      ssl_client_auth="required") as s:
        assert s.ca_file == str(ca_file)
        p = Producer({"bootstrap.servers": s.listeners["SSL"], "security.protocol": "ssl",
                      "ssl.ca.location": str(ca_file), "ssl.certificate.location": str(ccert),
                      "ssl.key.location": str(ckey)})
        p.produce("f", b"x")
        assert p.flush(15) == 0
        (conn,) = [c for c in s.connections() if c["listener"] == "SSL"][:1]
        assert conn["principal"].startswith("User:CN=kim,OU=") and conn["principal"].endswith(",O=Test Org")


@pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_PLAINTEXT", "SSL"], users={"alice": "alice-secret"},
                    ssl_client_auth="requested")
def test_every_request_context_carries_the_listener_and_the_principal(tenure_server):
    """What the authorizer reads: RequestContext.listener and .principal of each request (User:ANONYMOUS where no
    one authenticated: PLAINTEXT, SSL without a client certificate)."""
    from confluent_kafka.admin import AdminClient
    seen: list = []
    real = tenure_server.server.handlers[3]

    async def metadata(req, ctx):
        seen.append((ctx.listener, ctx.principal))
        return await real(req, ctx)
    tenure_server.call(tenure_server.server.handlers.__setitem__, 3, metadata)
    for listener, user, cert in (("PLAINTEXT", None, None), ("SASL_PLAINTEXT", "alice", None),
                                 ("SSL", None, "lee"), ("SSL", None, None)):
        conf = tenure_server.client_settings(listener, user, mechanism="PLAIN", cert=cert).confluent()
        AdminClient(conf).list_topics(timeout=10)
    assert set(seen) == {("PLAINTEXT", "User:ANONYMOUS"), ("SASL_PLAINTEXT", "User:alice"),
                         ("SSL", "User:CN=lee,OU=tenure client,O=tenure"), ("SSL", "User:ANONYMOUS")}
