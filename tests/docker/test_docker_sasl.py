"""docker/docker-compose.sasl.yml: the `sasl` profile's server (PLAINTEXT and SASL_SSL listeners, its CA in its
volume) and the example consumer over SASL_SSL with SCRAM-SHA-512, checked structurally, and docker/consumer.py run
for real with that service's environment against an in-process server with the same listeners."""
from __future__ import annotations

import os
import uuid

from tenure.server import ServerThread
from tests.docker.test_docker_files import Consumer, env_of, load_compose, merge, partitions, wait_until  # noqa: F401


def compose() -> dict:
    return load_compose("docker-compose.sasl.yml")


def test_sasl_profile_services():
    c = compose()
    assert set(c["services"]) == {"tenure-sasl", "consumer-sasl"}
    assert all(svc["profiles"] == ["sasl"] for svc in c["services"].values()), "not started by a plain `up`"
    server, consumer = c["services"]["tenure-sasl"], c["services"]["consumer-sasl"]
    assert server["build"]["target"] == "server" and "command" in server
    cmd = server["command"]
    assert cmd[cmd.index("--listener", 2) + 1] == "SASL_SSL://:9093" and "demo:demo-secret" in cmd
    assert env_of(server)["TENURE_ADVERTISED_HOST"] == "tenure-sasl", "the certificate names it"
    assert "tenure-sasl-data:/data" in server["volumes"]
    assert [str(p) for p in server["ports"]] == ["127.0.0.1:9093:9093", "127.0.0.1:9645:9644"]
    env = env_of(consumer)
    assert env["BOOTSTRAP_SERVERS"] == "tenure-sasl:9093" and env["SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["SSL_CAFILE"] == "/server/tls/ca.pem" and "tenure-sasl-data:/server:ro" in consumer["volumes"]
    assert consumer["depends_on"] == {"tenure-sasl": {"condition": "service_healthy"}}
    # merged with the base file the plain services stay as they are
    base = load_compose("docker-compose.yml")
    merged = merge(base, c)
    assert set(merged["services"]) == {"tenure", "consumer", "audit", "tenure-sasl", "consumer-sasl"}


def test_the_example_consumer_over_sasl_ssl(tmp_path, monkeypatch):
    """consumer.py with consumer-sasl's environment (SCRAM-SHA-512, the server's ca.pem) joins its static group
    over a SASL_SSL listener and consumes what it produced."""
    env = env_of(compose()["services"]["consumer-sasl"])
    group, topic = f"dks-g-{uuid.uuid4().hex[:8]}", f"dks-t-{uuid.uuid4().hex[:8]}"
    with ServerThread(listeners=("PLAINTEXT", "SASL_SSL"), users=("demo:demo-secret",), tls_dir=str(tmp_path)) as s:
        for k in ("SECURITY_PROTOCOL", "SASL_MECHANISM", "SASL_USERNAME", "SASL_PASSWORD"):
            monkeypatch.setenv(k, env[k])
        monkeypatch.setenv("SSL_CAFILE", os.path.join(tmp_path, "ca.pem"))
        c = Consumer(s.listeners["SASL_SSL"], group, topic, "sasl-1")
        try:
            gen, member, text = wait_until(lambda: (c.assignments() or [None])[-1], 60, "consumer-sasl assigned")
            assert partitions(text) == {0, 1, 2, 3}
            g = s.group(group)
            assert g.member("sasl-1") is not None and g.generation == gen
            assert ("SASL_SSL", "User:demo") in {(x["listener"], x["principal"]) for x in s.connections()}
        finally:
            assert c.stop() == 0
        assert c.stats()["produced"] > 0
