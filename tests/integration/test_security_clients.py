"""Real clients over TLS and SASL listeners: confluent-kafka (librdkafka), kafka-python, aiokafka and kcat each
produce, consume in a static group and commit over SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN and
SSL with a client certificate; a wrong password fails at once with the client's authentication error while other
clients go on; the listener a client came in on is the one Metadata advertises."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time

import pytest

SECURE = pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT", "SSL"],
                            users={"alice": "alice-secret", "bob": "bob-secret"}, ssl_client_auth="required",
                            initial_rebalance_delay_ms=0, default_partitions=1)
# (listener, SASL mechanism or None, client certificate's common name or None)
CASES = [("SASL_SSL", "SCRAM-SHA-512", None), ("SASL_PLAINTEXT", "PLAIN", None), ("SSL", None, "alice")]
N = 5


def settings(server, listener, mechanism, cert):
    return server.client_settings(listener, "alice" if mechanism else None, mechanism=mechanism, cert=cert)


def check_group(server, group, instance, topic):
    """The static member joined and its commit reached the coordinator."""
    g = server.group(group)
    assert g is not None and g.member(instance) is not None and g.member(instance).is_static
    assert g.offset(topic, 0) == N


@SECURE
@pytest.mark.parametrize("listener,mechanism,cert", CASES)
def test_confluent_kafka(tenure_server, listener, mechanism, cert):
    from confluent_kafka import Consumer, Producer
    conf = settings(tenure_server, listener, mechanism, cert).confluent()
    topic, group = f"cf-{listener}", f"cf-g-{listener}"
    p = Producer({**conf, "enable.idempotence": True})
    for i in range(N):
        p.produce(topic, f"v{i}".encode(), f"k{i}".encode())
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": group, "group.instance.id": "cf-1", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < N and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.commit(asynchronous=False)
    check_group(tenure_server, group, "cf-1", topic)
    c.close()
    assert got == [f"v{i}".encode() for i in range(N)]


@SECURE
@pytest.mark.parametrize("listener,mechanism,cert", CASES)
def test_kafka_python(tenure_server, listener, mechanism, cert):
    from kafka import KafkaConsumer, KafkaProducer
    kw = settings(tenure_server, listener, mechanism, cert).kafka_python()
    topic, group = f"kp-{listener}", f"kp-g-{listener}"
    p = KafkaProducer(**kw)
    for i in range(N):
        p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode()).get(15)
    p.close()
    c = KafkaConsumer(topic, **kw, group_id=group, group_instance_id="kp-1", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=15000)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == N:
            break
    c.commit()
    check_group(tenure_server, group, "kp-1", topic)
    c.close()
    assert got == [f"v{i}".encode() for i in range(N)]


@SECURE
@pytest.mark.parametrize("listener,mechanism,cert", CASES)
def test_aiokafka(tenure_server, listener, mechanism, cert):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    s = settings(tenure_server, listener, mechanism, cert)
    topic, group = f"ak-{listener}", f"ak-g-{listener}"

    async def run():
        p = AIOKafkaProducer(**s.aiokafka())
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait(topic, f"v{i}".encode(), key=f"k{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, **s.aiokafka(), group_id=group, group_instance_id="ak-1",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            got = []
            async with asyncio.timeout(30):
                async for m in c:
                    got.append(m.value)
                    if len(got) == N:
                        break
            await c.commit()
            await asyncio.to_thread(check_group, tenure_server, group, "ak-1", topic)
        finally:
            await c.stop()
        return got
    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(N)]


# kcat links the system's librdkafka (Debian's 2.0.2), whose SCRAM client-final-message repeats the client nonce
# (a regression of librdkafka 2.0.0-2.0.2, fixed in 2.1.0): Kafka's ScramSaslServer refuses it ("Invalid client
# nonce"), and so does tenure (test_kcat_scram_of_librdkafka_2_0_is_refused_as_kafka_refuses_it). kcat goes
# over SASL_SSL with PLAIN here; confluent-kafka (librdkafka 2.16) does SCRAM-SHA-512 above.
KCAT_CASES = [("SASL_SSL", "PLAIN", None), ("SASL_PLAINTEXT", "PLAIN", None), ("SSL", None, "alice")]


@pytest.mark.kcat
@SECURE
@pytest.mark.parametrize("listener,mechanism,cert", KCAT_CASES)
def test_kcat(tenure_server, listener, mechanism, cert):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    conf = settings(tenure_server, listener, mechanism, cert).confluent()
    bootstrap = conf.pop("bootstrap.servers")
    x = [arg for k, v in conf.items() for arg in ("-X", f"{k}={v}")]
    topic, group = f"kc-{listener}", f"kc-g-{listener}"
    out = subprocess.run([kcat, "-b", bootstrap, *x, "-P", "-t", topic, "-K", ":"],
                         input="".join(f"k{i}:v{i}\n" for i in range(N)).encode(), capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # a balanced consumer in a static group: -e exits at the end of the partition, its offsets committed on close
    res = subprocess.run([kcat, "-b", bootstrap, *x, "-X", "group.instance.id=kc-1", "-X",
                          "auto.offset.reset=earliest", "-G", group, topic, "-e", "-J", "-q"],
                         capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    msgs = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert [m["payload"] for m in msgs] == [f"v{i}" for i in range(N)]
    check_group(tenure_server, group, "kc-1", topic)


def _librdkafka_version(kcat: str) -> str:
    import re
    out = subprocess.run([kcat, "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"librdkafka ([0-9.]+)", out)
    return m.group(1) if m else ""


@pytest.mark.kcat
@SECURE
def test_kcat_scram_of_librdkafka_2_0_is_refused_as_kafka_refuses_it(tenure_server):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    version = _librdkafka_version(kcat)
    conf = tenure_server.client_settings("SASL_SSL", "alice", mechanism="SCRAM-SHA-512").confluent()
    bootstrap = conf.pop("bootstrap.servers")
    res = subprocess.run([kcat, "-b", bootstrap, *[a for k, v in conf.items() for a in ("-X", f"{k}={v}")], "-L",
                          "-m", "2"], capture_output=True, text=True, timeout=60)
    if version.startswith("2.0."):
        assert res.returncode != 0
        assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
               "SCRAM-SHA-512" in res.stderr, res.stderr
    else:                                     # a fixed librdkafka: SCRAM works
        assert res.returncode == 0, res.stderr


# ---- a wrong password: the client's authentication error at once; the others go on
@SECURE
def test_wrong_password_fails_at_once_and_others_are_unaffected(tenure_server):
    from confluent_kafka import KafkaError, Producer
    good = Producer(tenure_server.client_settings("SASL_SSL", "bob").confluent())
    good.produce("shared", b"before")
    assert good.flush(15) == 0
    errors: list = []
    bad = Producer({**tenure_server.client_settings("SASL_SSL", "alice", password="not-it").confluent(),
                    "error_cb": errors.append})
    t0 = time.monotonic()
    while not errors and time.monotonic() - t0 < 10:
        bad.poll(0.1)
    elapsed = time.monotonic() - t0
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
           "SCRAM-SHA-512" in errors[0].str()
    assert elapsed < 3, f"the failure took {elapsed:.1f}s"
    good.produce("shared", b"after")                          # the good client's connection was not touched
    assert good.flush(15) == 0
    assert tenure_server.metrics.closed_connections["authentication_failed"] >= 1


@SECURE
def test_wrong_password_kafka_python_and_aiokafka_see_kafkas_authentication_error(tenure_server, caplog):
    """kafka-python 3 and aiokafka report a failed bootstrap (their timeout / connection error) and log the broker's
    SASL_AUTHENTICATION_FAILED with Kafka's message, at once (well within their bootstrap bound)."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError
    wrong = tenure_server.client_settings("SASL_PLAINTEXT", "alice", mechanism="PLAIN", password="nope")
    t0 = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(**wrong.kafka_python(), bootstrap_timeout_ms=3000)
    assert time.monotonic() - t0 < 10
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    assert any("SaslAuthenticationFailedError" in m and "Authentication failed: Invalid username or password" in m
               for m in logged), logged
    caplog.clear()

    async def run():
        p = AIOKafkaProducer(**wrong.aiokafka(), request_timeout_ms=3000)
        try:
            await p.start()
        finally:
            await p.stop()
    with pytest.raises(KafkaConnectionError):
        asyncio.run(run())
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka")]
    assert any("Authentication failed: Invalid username or password" in m for m in logged), logged


@SECURE
def test_metadata_advertises_the_listener_the_request_came_in_on(tenure_server):
    from confluent_kafka.admin import AdminClient
    for listener, user, mechanism in (("SASL_SSL", "bob", "SCRAM-SHA-256"), ("PLAINTEXT", None, None)):
        conf = tenure_server.client_settings(listener, user, mechanism=mechanism).confluent()
        md = AdminClient(conf).list_topics(timeout=10)
        (broker,) = md.brokers.values()
        assert f"{broker.host}:{broker.port}" == tenure_server.listeners[listener]


@SECURE
def test_confluent_kafka_over_oauthbearer(tenure_server):
    """librdkafka's unsecured OAUTHBEARER tokens (enable.sasl.oauthbearer.unsecure.jwt) validate as Kafka's
    default validator checks them; the principal is the token's subject."""
    from confluent_kafka import Consumer, Producer
    conf = tenure_server.client_settings("SASL_SSL", "carol", mechanism="OAUTHBEARER").confluent()
    p = Producer(conf)
    p.produce("oauth", b"v0")
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": "oauth-g", "group.instance.id": "o-1", "auto.offset.reset": "earliest"})
    c.subscribe(["oauth"])
    deadline, m = time.time() + 30, None
    while m is None and time.time() < deadline:
        m = c.poll(0.5)
    assert m is not None and m.error() is None and m.value() == b"v0"
    c.commit(asynchronous=False)
    assert tenure_server.group("oauth-g").offset("oauth", 0) == 1
    c.close()
    assert tenure_server.metrics.authentications[("SASL_SSL", "OAUTHBEARER", "authenticated")] >= 2


@pytest.mark.tenure(listeners=["SASL_SSL"], users={"alice": "alice-secret"}, initial_rebalance_delay_ms=0,
                    connections_max_reauth_ms=1500)
def test_confluent_kafka_reauthenticates_and_keeps_its_membership(tenure_server):
    from confluent_kafka import Consumer, Producer, TopicPartition
    conf = tenure_server.client_settings("SASL_SSL", "alice").confluent()
    p = Producer(conf)
    p.produce("ra", b"v")
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": "ra-g", "group.instance.id": "ra-1", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["ra"])
    got = None
    deadline = time.time() + 30
    while got is None and time.time() < deadline:
        got = c.poll(0.5)
    assert got is not None and got.error() is None
    generation = tenure_server.group("ra-g").generation
    until = time.time() + 4.5                    # three session lifetimes
    while time.time() < until:
        c.poll(0.5)
        c.commit(offsets=[TopicPartition("ra", 0, got.offset() + 1)], asynchronous=False)
    g = tenure_server.group("ra-g")
    c.close()
    assert g.generation == generation and g.rebalances == 1 and g.member("ra-1") is not None
    assert tenure_server.metrics.authentications[("SASL_SSL", "SCRAM-SHA-512", "reauthenticated")] >= 2
    assert tenure_server.metrics.closed_connections["sasl_session_expired"] == 0


def test_confluent_kafka_with_signed_tokens_checked_against_a_jwks_file(tmp_path):
    """--oauth-jwks-file: a token signed by a key of the JWKS authenticates as its subject; one signed by another
    key, or expired, fails at once with Kafka's invalid_token answer."""
    from confluent_kafka import KafkaError, Producer
    from joserfc import jwt
    from joserfc.jwk import KeySet, RSAKey

    from tenure.server import ServerThread
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(KeySet([key]).as_dict(private=False)))

    def token_cb(signing_key, lifetime_s: int):
        def cb(_config):
            exp = int(time.time()) + lifetime_s
            tok = jwt.encode({"alg": "RS256", "kid": "k1"}, {"sub": "svc-orders", "exp": exp, "aud": "kafka"},
                             signing_key)
            return tok, float(max(exp, time.time() + 60))
        return cb

    with ServerThread(listeners=("SASL_SSL",), oauth_jwks_file=str(jwks), oauth_audience="kafka") as s:
        base = {"bootstrap.servers": s.listeners["SASL_SSL"], "security.protocol": "sasl_ssl",
                "ssl.ca.location": s.ca_file, "sasl.mechanism": "OAUTHBEARER"}
        good = Producer({**base, "oauth_cb": token_cb(key, 300)})
        good.produce("jwt", b"x")
        assert good.flush(15) == 0
        assert ("SASL_SSL", "User:svc-orders") in {(c["listener"], c["principal"]) for c in s.connections()}
        for signing_key, lifetime in ((stranger, 300), (key, -60)):
            errors: list = []
            bad = Producer({**base, "oauth_cb": token_cb(signing_key, lifetime), "error_cb": errors.append})
            deadline = time.monotonic() + 10
            while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
                bad.poll(0.1)
            assert any(e.code() == KafkaError._AUTHENTICATION and "invalid_token" in e.str() for e in errors), errors


@SECURE
def test_kafka_python_and_aiokafka_over_oauthbearer(tenure_server):
    """Their token providers hand over an unsecured token (security/clients.py), validated as Kafka's default
    validator does; each authenticates as the token's subject."""
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer
    settings = tenure_server.client_settings("SASL_SSL", "pat", mechanism="OAUTHBEARER")
    p = KafkaProducer(**settings.kafka_python())
    p.send("oauth-kp", b"x").get(15)
    p.close()

    async def run():
        ap = AIOKafkaProducer(**settings.aiokafka())
        await ap.start()
        try:
            await ap.send_and_wait("oauth-ak", b"y")
        finally:
            await ap.stop()
    asyncio.run(run())
    assert tenure_server.metrics.authentications[("SASL_SSL", "OAUTHBEARER", "authenticated")] >= 2
    assert not any(o == "failed" for *_, o in tenure_server.metrics.authentications)
