"""The SASL state machine of a connection (security/sasl.py) against Kafka's SaslServerAuthenticator: what each
request in each state gets, the mechanisms' exchanges driven by real client-side implementations (scramp's SCRAM
client), failures with Kafka's codes and messages, re-authentication (KIP-368) and session lifetimes."""
from __future__ import annotations

import pytest
from scramp import ScramClient

from tenure.protocol.errors import ErrorCode
from tenure.security.oauth import TokenValidator, unsecured_token
from tenure.security.sasl import COMPLETE, MAX_ROUNDS, SaslAuthenticator, SaslSettings
from tenure.security.users import UserStore
from tests.security.sasl_support import api_versions, authenticate, handshake, metadata, response


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def users():
    store = UserStore()
    store.add("alice", "alice-secret")
    store.add("bob", "bob-secret")
    return store


def make(users, clock=None, **kw) -> SaslAuthenticator:
    now = clock or Clock()
    validator = kw.pop("validator", TokenValidator(now_s=lambda: now() / 1000))
    return SaslAuthenticator(SaslSettings(users, validator=validator, **kw), now_ms=now)


def plain(sasl, user, password, authzid=""):
    req = handshake("PLAIN")
    hs = response(sasl.handle(req).frame, req)
    assert hs.error_code == 0
    req = authenticate(f"{authzid}\0{user}\0{password}".encode())
    step = sasl.handle(req)
    return step, response(step.frame, req)


def scram(sasl, mechanism, user, password, tamper=None):
    """A full SCRAM exchange with scramp's client; `tamper(client_final) -> bytes` changes the final message."""
    client = ScramClient([mechanism], user, password)
    req = handshake(mechanism)
    assert response(sasl.handle(req).frame, req).error_code == 0
    req = authenticate(client.get_client_first().encode())
    step = sasl.handle(req)
    first = response(step.frame, req)
    if first.error_code:
        return step, first
    client.set_server_first(first.auth_bytes.decode())
    final = client.get_client_final().encode()
    req = authenticate(tamper(final) if tamper else final)
    step = sasl.handle(req)
    out = response(step.frame, req)
    if out.error_code == 0:
        client.set_server_final(out.auth_bytes.decode())       # the server proved it knows the credential
    return step, out


def test_api_versions_then_plain_authenticates_as_the_user(users):
    sasl = make(users)
    assert sasl.handle(api_versions()).dispatch             # the dispatcher answers ApiVersions
    step, out = plain(sasl, "alice", "alice-secret")
    assert out.error_code == 0 and not step.close
    assert sasl.authenticated and sasl.principal == "User:alice"
    assert out.session_lifetime_ms == 0                     # connections.max.reauth.ms off: no lifetime


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_authenticates_and_proves_the_server(users, mechanism):
    sasl = make(users)
    step, out = scram(sasl, mechanism, "bob", "bob-secret")
    assert out.error_code == 0 and sasl.principal == "User:bob" and sasl.state == COMPLETE


@pytest.mark.parametrize("user,password,message", [
    ("alice", "wrong", "Authentication failed: Invalid username or password"),
    ("nobody", "x", "Authentication failed: Invalid username or password"),
    ("", "x", "Authentication failed: username not specified"),
    ("alice", "", "Authentication failed: password not specified"),
])
def test_plain_failures_answer_58_with_kafkas_message_and_close(users, user, password, message):
    sasl = make(users)
    step, out = plain(sasl, user, password)
    assert out.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and out.error_message == message
    assert step.close and step.failed and not sasl.authenticated


def test_plain_with_another_authorization_id_fails(users):
    step, out = plain(make(users), "alice", "alice-secret", authzid="bob")
    assert out.error_code == 58 and "authorization id that is different from username" in out.error_message


def test_plain_token_count_is_checked(users):
    sasl = make(users)
    req = handshake("PLAIN")
    sasl.handle(req)
    req = authenticate(b"just-one-token")
    out = response(sasl.handle(req).frame, req)
    assert (out.error_code, out.error_message) == (58, "Invalid SASL/PLAIN response: expected 3 tokens, got 1")


@pytest.mark.parametrize("case", ["wrong password", "unknown user", "bad proof", "bad nonce"])
def test_scram_failures_answer_kafkas_generic_message(users, case):
    def bad_proof(final: bytes) -> bytes:
        head, _, proof = final.rpartition(b"p=")
        return head + b"p=" + (b"A" if proof[:1] != b"A" else b"B") + proof[1:]

    def bad_nonce(final: bytes) -> bytes:
        parts = final.split(b",")
        return b",".join(p if not p.startswith(b"r=") else p + b"x" for p in parts)
    user, password, tamper = {"wrong password": ("alice", "nope", None), "unknown user": ("mallory", "x", None),
                              "bad proof": ("alice", "alice-secret", bad_proof),
                              "bad nonce": ("alice", "alice-secret", bad_nonce)}[case]
    sasl = make(users)
    step, out = scram(sasl, "SCRAM-SHA-512", user, password, tamper)
    assert out.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert out.error_message == ("Authentication failed during authentication due to invalid credentials with SASL "
                                 "mechanism SCRAM-SHA-512")
    assert step.close and not sasl.authenticated


def test_unsupported_mechanism_answers_33_with_the_enabled_ones_and_closes(users):
    sasl = make(users, mechanisms=("PLAIN", "SCRAM-SHA-512"))
    req = handshake("GSSAPI")
    step = sasl.handle(req)
    out = response(step.frame, req)
    assert out.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and sorted(out.mechanisms) == ["PLAIN",
                                                                                                "SCRAM-SHA-512"]
    assert step.close


def test_a_request_before_the_handshake_closes_without_an_answer(users):
    step = make(users).handle(metadata())
    assert step.close and step.frame is None


def test_api_versions_twice_closes(users):
    sasl = make(users)
    sasl.handle(api_versions())
    step = sasl.handle(api_versions())
    assert step.close and step.frame is None


def test_another_request_during_the_exchange_gets_illegal_sasl_state_then_closes(users):
    sasl = make(users)
    sasl.handle(handshake("PLAIN"))
    req = metadata()          # Metadata has no error answer of its own: closed without one
    step = sasl.handle(req)
    assert step.close
    sasl = make(users)
    sasl.handle(handshake("PLAIN"))
    req = api_versions()
    step = sasl.handle(req)
    assert step.close and req.spec.response.decode(step.frame, version=0, header=True,   # v0: an error answer
                                                   framed=True).error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_handshake_v0_takes_raw_tokens(users):
    sasl = make(users)
    req = handshake("PLAIN", version=0)
    assert response(sasl.handle(req).frame, req).error_code == 0
    step = sasl.raw_token(b"\0alice\0alice-secret")
    assert step.frame == b"\0\0\0\0" and sasl.principal == "User:alice"


def test_raw_token_failure_closes_without_an_answer(users):
    sasl = make(users)
    sasl.handle(handshake("PLAIN", version=0))
    step = sasl.raw_token(b"\0alice\0wrong")
    assert step.close and step.frame is None and not sasl.authenticated


def test_a_bounded_number_of_tokens(users):
    sasl = make(users)
    sasl.handle(handshake("OAUTHBEARER"))
    for _ in range(MAX_ROUNDS // 2):        # a client that keeps answering the error challenge anew
        req = authenticate(b"n,,\x01auth=Bearer abc.def.\x01\x01")
        assert response(sasl.handle(req).frame, req).error_code == 0
        req = authenticate(b"n,,\x01auth=Bearer abc.def.\x01\x01")
        out = response(sasl.handle(req).frame, req)
    req = authenticate(b"\x01")
    out = response(sasl.handle(req).frame, req)
    assert out.error_code == 58 and "more than" in out.error_message


# ---- OAUTHBEARER
def oauth(sasl, token: str, authzid: str = ""):
    req = handshake("OAUTHBEARER")
    sasl.handle(req)
    req = authenticate(f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode())
    step = sasl.handle(req)
    return step, response(step.frame, req)


def test_oauthbearer_unsecured_token_authenticates_with_its_lifetime(users):
    clock = Clock()
    sasl = make(users, clock)
    step, out = oauth(sasl, unsecured_token("carol", 60, now_s=clock() / 1000))
    assert out.error_code == 0 and sasl.principal == "User:carol"
    assert out.session_lifetime_ms == 60000          # the token's expiry bounds the session (KIP-368)


def test_oauthbearer_expired_token_gets_the_error_challenge_then_58(users):
    clock = Clock()
    sasl = make(users, clock)
    step, out = oauth(sasl, unsecured_token("carol", -1, now_s=clock() / 1000))
    assert out.error_code == 0 and out.auth_bytes == b'{"status":"invalid_token"}' and not step.close
    req = authenticate(b"\x01")
    step = sasl.handle(req)
    out = response(step.frame, req)
    assert (out.error_code, out.error_message) == (58, '{"status":"invalid_token"}') and step.close


@pytest.mark.parametrize("token", ["not-a-jws", "e30.e30.", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4IiwiZXhwIjo5OTk5OTk5OTk5fQ.sig"])
def test_oauthbearer_bad_tokens_are_refused(users, token):
    step, out = oauth(make(users), token)
    assert out.auth_bytes == b'{"status":"invalid_token"}'


def test_oauthbearer_malformed_first_message_fails(users):
    sasl = make(users)
    sasl.handle(handshake("OAUTHBEARER"))
    req = authenticate(b"garbage")
    out = response(sasl.handle(req).frame, req)
    assert out.error_code == 58 and "OAUTHBEARER" in out.error_message


# ---- re-authentication and session lifetime (KIP-368)
def test_session_lifetime_from_connections_max_reauth_ms_and_expiry(users):
    clock = Clock()
    sasl = make(users, clock, max_reauth_ms=5000)
    step, out = plain(sasl, "alice", "alice-secret")
    assert out.session_lifetime_ms == 5000 and not sasl.expired()
    clock.ms += 5000
    assert sasl.expired()


def test_reauthentication_keeps_the_principal_and_renews_the_session(users):
    clock = Clock()
    sasl = make(users, clock, max_reauth_ms=5000)
    scram(sasl, "SCRAM-SHA-512", "alice", "alice-secret")
    clock.ms += 4000
    assert sasl.wants(handshake("SCRAM-SHA-512")) and not sasl.wants(metadata())
    step, out = scram(sasl, "SCRAM-SHA-512", "alice", "alice-secret")
    assert out.error_code == 0 and out.session_lifetime_ms == 5000 and sasl.reauthentications == 1
    clock.ms += 4000
    assert not sasl.expired()


def test_reauthentication_as_another_principal_fails(users):
    sasl = make(users)
    plain(sasl, "alice", "alice-secret")
    step, out = plain(sasl, "bob", "bob-secret")
    assert out.error_code == 58 and step.close
    assert out.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"


def test_reauthentication_with_another_mechanism_fails(users):
    sasl = make(users)
    plain(sasl, "alice", "alice-secret")
    step, out = scram(sasl, "SCRAM-SHA-256", "alice", "alice-secret")
    assert out.error_code == 58 and out.error_message == ("SASL mechanism 'SCRAM-SHA-256' requested by client is not "
                                                          "supported for re-authentication of mechanism 'PLAIN'")


def test_a_client_that_authenticated_with_saslauthenticate_v0_does_not_re_authenticate(users):
    """Kafka re-authenticates only a client that sent SaslAuthenticate v1+ (it knows session lifetimes); another's
    SaslHandshake after authentication goes to the broker (ILLEGAL_SASL_STATE)."""
    sasl = make(users)
    sasl.handle(handshake("PLAIN"))
    req = authenticate(b"\0alice\0alice-secret", version=0)
    assert response(sasl.handle(req).frame, req).error_code == 0 and sasl.authenticated
    assert not sasl.wants(handshake("PLAIN"))
