"""OAUTHBEARER tokens (RFC 7628): Kafka's default validation of unsecured tokens (an unsigned JWS, alg "none",
whose "sub" claim is the principal and whose "exp" claim must be in the future), or, given a JWKS file, signed
JWTs checked against its keys (joserfc) with their expiry, and the audience and issuer when asked."""
from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# the client's first message: gs2 header "n,[a=authzid]," then \x01-separated key=value pairs, "auth=Bearer TOKEN"
# among them, ended by \x01\x01 (RFC 7628 section 3.1)
_TOKEN = re.compile(r"^[-_.a-zA-Z0-9]+$")
_KEY = re.compile(r"^[A-Za-z]+$")


class TokenError(Exception):
    """A token that does not validate: `status` is the RFC 7628 error status the server answers with."""

    def __init__(self, message: str, status: str = "invalid_token") -> None:
        super().__init__(message)
        self.status = status


class BadInitialResponse(Exception):
    """The client's first message is not an OAUTHBEARER initial response."""


@dataclass(frozen=True)
class Token:
    principal: str
    expires_ms: int | None


def parse_initial_response(data: bytes) -> tuple[str, str, dict[str, str]]:
    """(authzid, token, extensions) of an OAUTHBEARER client first message."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInitialResponse("Invalid OAUTHBEARER client first message") from exc
    if not text.startswith("n,") or "\x01" not in text:
        raise BadInitialResponse("Invalid OAUTHBEARER client first message")
    gs2, _, rest = text.partition("\x01")
    fields = gs2.split(",")
    if len(fields) != 3 or fields[2] != "" or (fields[1] and not fields[1].startswith("a=")):
        raise BadInitialResponse("Invalid OAUTHBEARER client first message")
    authzid = fields[1][2:].replace("=2C", ",").replace("=3D", "=")
    if not rest.endswith("\x01"):
        raise BadInitialResponse("Invalid OAUTHBEARER client first message")
    pairs = {}
    for item in rest[:-1].split("\x01"):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not _KEY.match(key):
            raise BadInitialResponse("Invalid OAUTHBEARER client first message")
        pairs[key] = value
    auth = pairs.pop("auth", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer":
        raise BadInitialResponse(f"Invalid scheme in OAUTHBEARER client first message: {scheme}")
    token = token.strip()
    if not _TOKEN.match(token):
        raise BadInitialResponse("Invalid OAUTHBEARER client first message")
    return authzid, token, pairs


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _time_claim(claims: dict, name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenError(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"Claim {name} is not a number")
    return float(value)


class TokenValidator:
    """Validate a token: unsecured (no `jwks_file`, Kafka's default) or signed against a JWKS file's keys.
    `now_s`: the clock (seconds)."""

    def __init__(self, jwks_file: str | None = None, *, audience: str | None = None, issuer: str | None = None,
                 principal_claim: str = "sub", now_s: Callable[[], float] = time.time) -> None:
        self.audience, self.issuer, self.principal_claim, self.now_s = audience, issuer, principal_claim, now_s
        self.keys = None
        if jwks_file:
            from joserfc.jwk import KeySet
            self.keys = KeySet.import_key_set(json.loads(Path(jwks_file).read_text()))

    def validate(self, token: str) -> Token:
        claims = self._signed(token) if self.keys is not None else self._unsecured(token)
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenError(f"Required claim missing or empty: {self.principal_claim}")
        exp = _time_claim(claims, "exp", True)
        _time_claim(claims, "iat", False)
        assert exp is not None
        if exp * 1000 <= self.now_s() * 1000:
            raise TokenError("The token is expired")
        if self.audience is not None:
            aud = claims.get("aud")
            if not (aud == self.audience or (isinstance(aud, list) and self.audience in aud)):
                raise TokenError("The token's audience is not the expected one")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise TokenError("The token's issuer is not the expected one")
        return Token(principal, int(exp * 1000))

    @staticmethod
    def _unsecured(token: str) -> dict:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenError("An unsecured token has three parts")
        try:
            header, claims = json.loads(_b64(parts[0])), json.loads(_b64(parts[1]))
        except (binascii.Error, ValueError) as exc:
            raise TokenError(f"The token is not an unsecured JWS: {exc}") from exc
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenError("The token is not an unsecured JWS")
        if header.get("alg") != "none" or parts[2]:
            raise TokenError("An unsecured token has alg none and no signature")
        return claims

    def _signed(self, token: str) -> dict:
        from joserfc import jwt
        from joserfc.errors import JoseError
        assert self.keys is not None
        try:
            decoded = jwt.decode(token, self.keys)
        except (JoseError, ValueError) as exc:
            raise TokenError(f"The token's signature does not verify: {exc}") from exc
        return dict(decoded.claims)


def unsecured_token(principal: str, lifetime_s: float = 3600, *, now_s: float | None = None, **claims) -> str:
    """An unsecured JWS as Kafka's unsecured login module makes one (tests and examples)."""
    now = time.time() if now_s is None else now_s
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()     # noqa: E731
    return f"{enc({'alg': 'none'})}.{enc({'sub': principal, 'iat': now, 'exp': now + lifetime_s, **claims})}."
