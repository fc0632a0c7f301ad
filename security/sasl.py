"""SASL authentication of one connection, as Kafka's SaslServerAuthenticator does it: ApiVersions (once) and
SaslHandshake first, then the mechanism's tokens - in SaslAuthenticate requests (handshake v1, KIP-152) or as raw
size-prefixed tokens (handshake v0) -, then the connection is authenticated as "User:NAME". A SaslHandshake after
that starts a re-authentication (KIP-368: same mechanism, same principal); a session lifetime
(connections.max.reauth.ms, or an OAUTHBEARER token's expiry) bounds how long a connection may go on without one.

Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677, `scramp` over the stored salted
credentials), OAUTHBEARER (RFC 7628; security/oauth.py). A failure answers Kafka's error (SASL_AUTHENTICATION_FAILED
58, UNSUPPORTED_SASL_MECHANISM 33, ILLEGAL_SASL_STATE 34) with Kafka's message, and the connection is then
closed; a request Kafka does not take at that point closes it without an answer.

No sockets here: the server's connection feeds frames (`raw_token`) and decoded requests (`handle`) and does
what the returned `Step` says."""
from __future__ import annotations

import json
import logging
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from tenure.protocol.codec import Request, encode_api_versions_error, encode_response
from tenure.protocol.error_responses import can_fail, error_response, sasl_authenticate_error, sasl_handshake_error
from tenure.protocol.errors import ErrorCode

from .oauth import BadInitialResponse, TokenError, TokenValidator, parse_initial_response
from .sasl_names import AUTHENTICATE, COMPLETE, FAILED, HANDSHAKE, INITIAL, MECHANISMS, OAUTHBEARER, PLAIN
from .users import SCRAM_MECHANISMS, UserStore

log = logging.getLogger("tenure.security")
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
DEFAULT_MAX_RECEIVE_BYTES = 524288      # Kafka's sasl.server.max.receive.size
MAX_ROUNDS = 8                          # SASL tokens one authentication may take (the mechanisms need at most 2)


class SaslFailure(Exception):
    """The exchange failed. `visible`: the message is Kafka's own for the client (SaslAuthenticationException);
    otherwise the client gets Kafka's generic "invalid credentials" message (SaslException)."""

    def __init__(self, message: str, visible: bool = True) -> None:
        super().__init__(message)
        self.visible = visible


class MechanismServer(Protocol):
    complete: bool
    principal_name: str
    expires_ms: int | None          # the credential's expiry (an OAUTHBEARER token's), epoch ms

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    def __init__(self, users: UserStore) -> None:
        self.users = users
        self.complete, self.principal_name = False, ""
        self.expires_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00", 3)
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Authentication failed: Invalid username or password") from None
        if not username:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        if not self.users.verify_password(username, password):
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different from "
                              "username")
        self.complete, self.principal_name = True, username
        return b""


def _scram_username(saslname: str) -> str:
    """Kafka's ScramFormatter.username: =2C and =3D unescaped; any other '=' is refused."""
    i = saslname.find("=")
    while i != -1:
        if saslname[i:i + 3] not in ("=2C", "=3D"):
            raise SaslFailure("Invalid username: " + saslname, visible=False)
        i = saslname.find("=", i + 1)
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """SCRAM over scramp's server, the credential read from the user store (unknown user: invalid credentials)."""

    def __init__(self, mechanism: str, users: UserStore) -> None:
        import secrets  # (with scramp: OpenSSL's hashes, at the first SCRAM exchange)

        from scramp import ScramMechanism
        self.mechanism, self.users = mechanism, users
        # the server's nonce as Kafka's ScramFormatter makes it: letters and digits (older librdkafka clients fail
        # on the '+', '/' and '=' of a base64 one)
        nonce = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(26))
        self.server = ScramMechanism(mechanism).make_server(self._credential, s_nonce=nonce)
        self.complete, self.principal_name = False, ""
        self.expires_ms: int | None = None
        self._round = 0

    def _credential(self, saslname: str):
        username = _scram_username(saslname)
        cred = self.users.credential(username, self.mechanism)
        if cred is None:
            raise SaslFailure("Authentication failed: Invalid user credentials", visible=False)
        if cred.iterations < SCRAM_MECHANISMS[self.mechanism][2]:
            raise SaslFailure(f"Iterations {cred.iterations} is less than the minimum", visible=False)
        self.principal_name = username
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def evaluate(self, token: bytes) -> bytes:
        from scramp import ScramException
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SCRAM message: not UTF-8", visible=False) from None
        self._round += 1
        try:
            if self._round == 1:
                self.server.set_client_first(text)
                gs2 = text.split(",", 2)
                authzid = gs2[1][2:] if len(gs2) > 2 and gs2[1].startswith("a=") else ""
                if authzid and _scram_username(authzid) != self.principal_name:
                    raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                                      "different from username")
                return self.server.get_server_first().encode()
            if self._round == 2:
                self.server.set_client_final(text)
                final = self.server.get_server_final().encode()
                self.complete = True
                return final
        except ScramException as exc:
            raise SaslFailure(f"SCRAM: {exc}", visible=False) from exc
        except (ValueError, IndexError, KeyError) as exc:     # scramp's parser on a malformed message
            raise SaslFailure(f"SCRAM: malformed message: {exc!r}", visible=False) from exc
        raise SaslFailure("Unexpected challenge in Sasl server state COMPLETE", visible=False)


class OAuthBearerServer:
    """RFC 7628's server side as Kafka's: a token that does not validate is answered with the error JSON as a
    challenge; the client's \\x01 reply then fails the exchange with that JSON as the message."""

    def __init__(self, validator: TokenValidator) -> None:
        self.validator = validator
        self.complete, self.principal_name = False, ""
        self.expires_ms: int | None = None
        self.error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self.error is not None:
            raise SaslFailure(self.error)
        self.error = None
        try:
            authzid, value, _ = parse_initial_response(token)
        except BadInitialResponse as exc:
            raise SaslFailure(str(exc), visible=False) from exc
        try:
            valid = self.validator.validate(value)
        except TokenError as exc:
            log.debug("OAUTHBEARER token refused: %s", exc)
            self.error = json.dumps({"status": exc.status}, separators=(",", ":"))
            return self.error.encode()
        if authzid and authzid != valid.principal:
            raise SaslFailure(f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                              f"different from the token's principal name ({valid.principal})")
        self.complete, self.principal_name, self.expires_ms = True, valid.principal, valid.expires_ms
        return b""


@dataclass
class SaslSettings:
    """What a SASL listener authenticates with."""
    users: UserStore
    mechanisms: tuple[str, ...] = MECHANISMS
    validator: TokenValidator = field(default_factory=TokenValidator)
    max_reauth_ms: int = 0                      # connections.max.reauth.ms (0: sessions do not expire)
    max_receive_bytes: int = DEFAULT_MAX_RECEIVE_BYTES

    def server(self, mechanism: str) -> MechanismServer:
        if mechanism == PLAIN:
            return PlainServer(self.users)
        if mechanism == OAUTHBEARER:
            return OAuthBearerServer(self.validator)
        return ScramServer(mechanism, self.users)


@dataclass(frozen=True)
class Step:
    """What the connection does next: send `frame` (if any) - after the failed-authentication delay when `failed` -,
    then close if `close`; `dispatch`: the request is not the authenticator's, serve it as any other."""
    frame: bytes | None = None
    close: bool = False
    failed: bool = False
    dispatch: bool = False
    reason: str = ""


# the states of a connection's authentication: sasl_names.py (INITIAL, HANDSHAKE, AUTHENTICATE, COMPLETE, FAILED)


class SaslAuthenticator:
    """The SASL state of one connection. `now_ms`: the wall clock (session expiry)."""

    def __init__(self, settings: SaslSettings, now_ms: Callable[[], int]) -> None:
        self.settings, self.now_ms = settings, now_ms
        self.state = INITIAL
        self.mechanism: str | None = None
        self.principal: str | None = None         # "User:NAME" once authenticated
        self.raw = False                          # handshake v0: the tokens come as raw frames
        self.expires_ms: int | None = None        # the session's end (None: no end)
        self.reauthentications = 0
        self.completions = 0                      # exchanges completed (the first and each re-authentication)
        self.client_reauthenticates = False       # a SaslAuthenticate v1+ came: the client re-authenticates
        self._server: MechanismServer | None = None
        self._previous: tuple[str, str] | None = None      # (mechanism, principal) while re-authenticating
        self._bad_mechanism: str | None = None
        self._rounds = 0

    @property
    def authenticated(self) -> bool:
        return self.state == COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def _text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    def wants(self, req: Request) -> bool:
        """Whether this request is the authenticator's (the connection is not authenticated, or it starts a
        re-authentication: a SaslHandshake from a client that authenticated with SaslAuthenticate v1+, as Kafka's
        connectedClientSupportsReauthentication; another goes to the broker, which answers ILLEGAL_SASL_STATE)."""
        return self.state != COMPLETE or (req.api_key == SASL_HANDSHAKE and self.client_reauthenticates)

    def expired(self) -> bool:
        return self.state == COMPLETE and self.expires_ms is not None and self.now_ms() >= self.expires_ms

    # ---- Kafka requests
    def handle(self, req: Request) -> Step:
        if self.state == COMPLETE:                       # a SaslHandshake: re-authentication (KIP-368)
            if req.api_version < 1:
                return Step(close=True, reason="a re-authentication needs SaslHandshake v1")
            assert self.mechanism is not None and self.principal is not None
            self._previous = (self.mechanism, self.principal)
            self.state = HANDSHAKE
            return self._handshake(req)
        if self.state == AUTHENTICATE:
            if self.raw:
                return Step(close=True, reason="a Kafka request where a raw SASL token was expected")
            if req.api_key != SASL_AUTHENTICATE:
                # Kafka: IllegalSaslStateException, answered with the request's own error response, then closed
                self.state = FAILED
                reason = f"{req.name} during SASL authentication"
                if req.api_key == API_VERSIONS:
                    return Step(encode_api_versions_error(req.correlation_id, ErrorCode.ILLEGAL_SASL_STATE),
                                close=True, failed=True, reason=reason)
                if not can_fail(req.api_key):             # no error answer of its own (Metadata)
                    return Step(close=True, failed=True, reason=reason)
                return Step(encode_response(req, error_response(req, ErrorCode.ILLEGAL_SASL_STATE)), close=True,
                            failed=True, reason=reason)
            self.client_reauthenticates = self.client_reauthenticates or req.api_version > 0
            return self._token(req.body.auth_bytes, req)
        if req.api_key == API_VERSIONS and self.state == INITIAL:
            self.state = HANDSHAKE
            return Step(dispatch=True)
        if req.api_key == SASL_HANDSHAKE and self.state in (INITIAL, HANDSHAKE):
            return self._handshake(req)
        # Kafka: "Unexpected Kafka request of type X during SASL handshake": closed without an answer
        self.state = FAILED
        return Step(close=True, reason=f"{req.name} before SASL authentication")

    def _handshake(self, req: Request) -> Step:
        mechanism = req.body.mechanism
        enabled = list(self.settings.mechanisms)
        if mechanism not in enabled:
            self.state = FAILED
            return Step(encode_response(req, sasl_handshake_error(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled)),
                        close=True, failed=True, reason=f"unsupported SASL mechanism {mechanism!r}")
        self.raw = req.api_version == 0
        self.state, self._rounds = AUTHENTICATE, 0
        if self._previous is not None and mechanism != self._previous[0]:
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self._previous[0]}'")
            self._server = None
        else:
            self._bad_mechanism = None
            self.mechanism = mechanism
            self._server = self.settings.server(mechanism)
        return Step(encode_response(req, sasl_handshake_error(ErrorCode.NONE, enabled)))

    # ---- the tokens
    def raw_token(self, payload: bytes) -> Step:
        """A raw token (after a v0 handshake): answered with the raw challenge, size-prefixed."""
        return self._token(payload, None)

    def _token(self, token: bytes, req: Request | None) -> Step:
        self._rounds += 1
        try:
            if self._bad_mechanism is not None:
                raise SaslFailure(self._bad_mechanism)
            if self._rounds > MAX_ROUNDS:
                raise SaslFailure(f"Authentication failed: more than {MAX_ROUNDS} SASL tokens")
            assert self._server is not None and self.mechanism is not None
            challenge = self._server.evaluate(bytes(token))
            lifetime = 0
            if self._server.complete:
                principal = "User:" + self._server.principal_name
                if self._previous is not None and principal != self._previous[1]:
                    old, new = self._previous[1].split(":", 1), principal.split(":", 1)
                    raise SaslFailure(f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: "
                                      f"{new[0]}.{new[1]}")
                lifetime = self._complete(principal, self._server.expires_ms)
        except SaslFailure as exc:
            message = str(exc) if exc.visible else (f"Authentication failed during {self._text()} due to invalid "
                                                    f"credentials with SASL mechanism {self.mechanism}")
            log.debug("SASL %s failed: %s", self.mechanism, exc)
            self.state = FAILED
            if req is None:                      # raw tokens have no error answer: the connection is closed
                return Step(close=True, failed=True, reason=message)
            return Step(encode_response(req, sasl_authenticate_error(ErrorCode.SASL_AUTHENTICATION_FAILED, message)),
                        close=True, failed=True, reason=message)
        if req is None:
            return Step(len(challenge).to_bytes(4, "big") + challenge)
        R = req.spec.response
        return Step(encode_response(req, R(error_code=0, error_message=None, auth_bytes=challenge,
                                           session_lifetime_ms=lifetime)))

    def _complete(self, principal: str, credential_expires_ms: int | None) -> int:
        """Authenticated: the session's lifetime (0: none), as Kafka's ReauthInfo computes it."""
        now = self.now_ms()
        max_reauth = self.settings.max_reauth_ms
        if credential_expires_ms is None and max_reauth <= 0:
            lifetime, self.expires_ms = 0, None
        else:
            candidates = ([max_reauth] if max_reauth > 0 else []) + (
                [credential_expires_ms - now] if credential_expires_ms is not None else [])
            lifetime = max(0, min(candidates))
            self.expires_ms = now + lifetime
        if self._previous is not None:
            self.reauthentications += 1
        self.completions += 1
        self.principal, self.state, self._previous = principal, COMPLETE, None
        return lifetime
