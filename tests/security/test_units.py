"""The security layer's parts alone: listener specs, the user store (salted credentials only, persisted), TLS
certificates and the principal of a client certificate, token validation (unsecured and JWKS)."""
from __future__ import annotations

import json
import ssl
import time

import pytest
from cryptography import x509

from tenure.security.listeners import ListenerSpec, parse_listeners
from tenure.security.oauth import TokenError, TokenValidator, parse_initial_response, unsecured_token
from tenure.security.tls import ServerTls, peer_principal, principal_of_cert
from tenure.security.users import SCRAM_MECHANISMS, ScramCredential, UserStore, read_users_file


# ---- listeners
def test_default_is_one_plaintext_listener():
    assert parse_listeners(None, None, "127.0.0.1", 9092) == [ListenerSpec("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)]


def test_listeners_with_a_protocol_map_and_default_host():
    specs = parse_listeners(("PLAINTEXT://:9092", "EXTERNAL://0.0.0.0:9093", "sasl_ssl"), "EXTERNAL:SASL_SSL",
                            "127.0.0.1", 0)
    assert [(s.name, s.protocol, s.host, s.port) for s in specs] == [
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092), ("EXTERNAL", "SASL_SSL", "0.0.0.0", 9093),
        ("SASL_SSL", "SASL_SSL", "127.0.0.1", 0)]
    assert specs[1].tls and specs[1].sasl and not specs[0].tls


@pytest.mark.parametrize("specs,pmap,message", [
    (("CUSTOM://:1",), None, "not a security protocol"),
    (("SSL://:1", "SSL://:2"), None, "own name"),
    (("SSL://:1", "PLAINTEXT://:1"), None, "same host and port"),
    (("SSL:/x",), None, "NAME://HOST:PORT"),
    (("SSL://:1",), "A:KERBEROS", "NAME:PROTOCOL"),
])
def test_bad_listeners_are_refused(specs, pmap, message):
    with pytest.raises(ValueError, match=message):
        parse_listeners(specs, pmap, "127.0.0.1", 0)


# ---- users
def test_a_user_is_kept_as_salted_credentials_never_the_password(tmp_path):
    path = tmp_path / "users.json"
    store = UserStore(path)
    store.add("alice", "correct horse")
    text = path.read_text()
    assert "correct horse" not in text and "alice" in text
    doc = json.loads(text)["users"]["alice"]
    assert set(doc) == set(SCRAM_MECHANISMS) and doc["SCRAM-SHA-512"]["iterations"] == 4096
    again = UserStore(path)                              # read back: the same credentials
    assert again.verify_password("alice", "correct horse") and not again.verify_password("alice", "wrong")
    assert again.credential("alice", "SCRAM-SHA-256") == store.credential("alice", "SCRAM-SHA-256")
    assert again.remove("alice", "SCRAM-SHA-512") and again.describe() == {"alice": [("SCRAM-SHA-256", 4096)]}
    assert UserStore(path).verify_password("alice", "correct horse")      # PLAIN checks the SHA-256 one then
    assert again.remove("alice") and not again.remove("alice") and UserStore(path).names() == []


def test_a_verified_password_is_remembered_until_the_user_changes(monkeypatch):
    store = UserStore()
    store.add("alice", "one")
    salted = []
    real = ScramCredential.matches
    monkeypatch.setattr(ScramCredential, "matches", lambda self, m, p: salted.append(p) or real(self, m, p))
    assert store.verify_password("alice", "one") and salted == ["one"]
    assert store.verify_password("alice", "one") and salted == ["one"]       # remembered: not salted again
    assert not store.verify_password("alice", "two")
    store.add("alice", "two")                                 # a new password: the old one no longer passes
    assert not store.verify_password("alice", "one") and store.verify_password("alice", "two")
    store.remove("alice")
    assert not store.verify_password("alice", "two")


def test_a_credential_from_a_salted_password_matches_rfc_7677():
    """RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil", its salt and 4096 iterations."""
    import base64
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    from scramp import ScramMechanism
    salt, stored, server, it = ScramMechanism("SCRAM-SHA-256").make_auth_info("pencil", 4096, cred.salt)
    assert (cred.stored_key, cred.server_key, cred.iterations) == (stored, server, it)


def test_users_file_json_or_lines(tmp_path):
    j = tmp_path / "u.json"
    j.write_text('{"a": "pa", "b": "p:b"}')
    assert read_users_file(str(j)) == [("a", "pa"), ("b", "p:b")]
    lines = tmp_path / "u.txt"
    lines.write_text("# users\na:pa\n\nb:p:b\n")
    assert read_users_file(str(lines)) == [("a", "pa"), ("b", "p:b")]
    lines.write_text("no-colon\n")
    with pytest.raises(ValueError):
        read_users_file(str(lines))


# ---- TLS
def test_generated_ca_and_server_certificate_kept_in_the_directory(tmp_path):
    tls = ServerTls.generate(str(tmp_path), ["broker.example"])
    cert = x509.load_pem_x509_certificate(open(tls.cert_file, "rb").read())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "broker.example" in names.get_values_for_type(x509.DNSName)
    ca_before = open(tls.ca_file).read()
    again = ServerTls.generate(str(tmp_path), [])            # a restart on the same dir keeps the CA
    assert open(again.ca_file).read() == ca_before
    assert oct((tmp_path / "ca-key.pem").stat().st_mode & 0o777) == "0o600"


def test_client_certificate_principal_is_the_subject_in_rfc2253_form(tmp_path):
    tls = ServerTls.generate(str(tmp_path), [])
    issued = tls.issue_client_cert("alice")
    assert issued.principal == "User:CN=alice,OU=tenure client,O=tenure"
    cert = x509.load_pem_x509_certificate(open(issued.cert_file, "rb").read())
    assert principal_of_cert(cert) == issued.principal
    assert peer_principal(None) is None


def test_a_tls_handshake_carries_the_client_certificate(tmp_path):
    """The server context of client auth 'required' verifies the client's certificate; its principal is read from
    the server side of the connection."""
    tls = ServerTls.generate(str(tmp_path), [])
    issued = tls.issue_client_cert("bob")
    server_ctx = tls.context("required")
    client_ctx = ssl.create_default_context(cafile=tls.ca_file)
    client_ctx.load_cert_chain(issued.cert_file, issued.key_file)
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    assert peer_principal(server) == "User:CN=bob,OU=tenure client,O=tenure"


# ---- tokens
def test_initial_response_parsing():
    assert parse_initial_response(b"n,a=bob,\x01auth=Bearer abc.def.\x01k=v\x01\x01") == ("bob", "abc.def.", {"k": "v"})


def test_unsecured_tokens():
    v = TokenValidator(now_s=lambda: 1000.0)
    assert v.validate(unsecured_token("u", 60, now_s=1000.0)).expires_ms == 1_060_000
    with pytest.raises(TokenError, match="expired"):
        v.validate(unsecured_token("u", -1, now_s=1000.0))
    with pytest.raises(TokenError):
        v.validate(unsecured_token("", 60, now_s=1000.0))


def test_jwks_validation(tmp_path):
    from joserfc import jwt
    from joserfc.jwk import ECKey, KeySet
    key = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    other = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(KeySet([key]).as_dict(private=False)))
    now = time.time()
    v = TokenValidator(str(jwks), audience="kafka", issuer="https://issuer")
    claims = {"sub": "dave", "exp": int(now) + 60, "aud": "kafka", "iss": "https://issuer"}
    good = jwt.encode({"alg": "ES256", "kid": "k1"}, claims, key)
    assert v.validate(good).principal == "dave"
    for bad in (jwt.encode({"alg": "ES256", "kid": "k1"}, claims, other),                 # another key
                jwt.encode({"alg": "ES256", "kid": "k1"}, {**claims, "exp": int(now) - 5}, key),   # expired
                jwt.encode({"alg": "ES256", "kid": "k1"}, {**claims, "aud": "other"}, key),
                unsecured_token("dave", 60)):                                            # not signed
        with pytest.raises(TokenError):
            v.validate(bad)
