"""The users SASL checks against: per user, a salted SCRAM credential per mechanism (RFC 5802: salt, iteration
count, StoredKey, ServerKey) - never the password. PLAIN verifies a password against the user's SCRAM credential
(salting it the same way). Users come from `--user NAME:PASSWORD`, a users file, AlterUserScramCredentials and the
admin endpoint; with a data dir they are kept in its `users.json`."""
from __future__ import annotations

import base64
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

# hashlib, hmac and secrets (OpenSSL's hashes, ~2 ms to import) are imported where a credential is made or checked:
# a server no client authenticates with never imports them (tests/test_startup_imports.py)
log = logging.getLogger("tenure.security")
USERS_FILE = "users.json"
# Kafka's ScramMechanism: its type id in the SCRAM credential APIs, hash, and least iteration count
SCRAM_MECHANISMS = {"SCRAM-SHA-256": (1, "sha256", 4096), "SCRAM-SHA-512": (2, "sha512", 4096)}
MAX_ITERATIONS = 16384                      # Kafka refuses more (AlterUserScramCredentials)
DEFAULT_ITERATIONS = 4096
VERIFIED_CACHE = 1024                       # PLAIN verifications remembered (user, keyed digest of the password)


def mechanism_of_type(type_id: int) -> str | None:
    return next((m for m, (t, _, _) in SCRAM_MECHANISMS.items() if t == type_id), None)


@dataclass(frozen=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism: the salt, iterations, stored key and server key (never the
    password)."""
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, iterations: int, salted: bytes) -> ScramCredential:
        import hashlib
        import hmac
        h = SCRAM_MECHANISMS[mechanism][1]
        client_key = hmac.new(salted, b"Client Key", h).digest()
        return cls(salt, iterations, hashlib.new(h, client_key).digest(), hmac.new(salted, b"Server Key", h).digest())

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = salt if salt is not None else os.urandom(24)          # (what secrets.token_bytes is)
        return cls.from_salted_password(mechanism, salt, iterations, salted_password(mechanism, password, salt,
                                                                                     iterations))

    def matches(self, mechanism: str, password: str) -> bool:
        import hmac
        other = ScramCredential.from_password(mechanism, password, self.iterations, self.salt)
        return hmac.compare_digest(other.stored_key, self.stored_key)

    def to_json(self) -> dict:
        b64 = lambda b: base64.b64encode(b).decode()       # noqa: E731
        return {"salt": b64(self.salt), "iterations": self.iterations, "stored_key": b64(self.stored_key),
                "server_key": b64(self.server_key)}

    @classmethod
    def from_json(cls, d: dict) -> ScramCredential:
        return cls(base64.b64decode(d["salt"]), int(d["iterations"]), base64.b64decode(d["stored_key"]),
                   base64.b64decode(d["server_key"]))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 Hi(): PBKDF2 with the mechanism's hash (the password as given: Kafka does not SASLprep it)."""
    import hashlib
    return hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism][1], password.encode(), salt, iterations)


def parse_user(text: str) -> tuple[str, str]:
    """`NAME:PASSWORD` (the first colon separates them)."""
    name, sep, password = text.partition(":")
    if not sep or not name or not password:
        raise ValueError(f"--user {text!r}: expected NAME:PASSWORD")
    return name, password


def read_users_file(path: str) -> list[tuple[str, str]]:
    """A users file: JSON {"name": "password", ...}, or lines NAME:PASSWORD (blank lines and # comments skipped)."""
    text = Path(path).read_text()
    if text.lstrip().startswith("{"):
        doc = json.loads(text)
        if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in doc.items()):
            raise ValueError(f"--users-file {path}: expected {{\"name\": \"password\", ...}}")
        return list(doc.items())
    return [parse_user(line.strip()) for line in text.splitlines() if line.strip() and not line.startswith("#")]


class UserStore:
    """Users and their SCRAM credentials, kept in `path` (None: in memory). Thread-safe: the admin endpoint's
    callers and the event loop share it."""

    def __init__(self, path: Path | None = None, iterations: int = DEFAULT_ITERATIONS) -> None:
        self.path, self.iterations = path, iterations
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}
        # PLAIN passwords verified since the user last changed, as keyed digests under a secret of this process
        # (never the password, never written): a client's next connections skip the salting (milliseconds each)
        self._verified: dict[tuple[str, bytes], None] = {}
        self._secret = os.urandom(32)                  # (what secrets.token_bytes is)
        if path is not None and path.is_file():
            doc = json.loads(path.read_text())
            for name, creds in doc.get("users", {}).items():
                self._users[name] = {m: ScramCredential.from_json(c) for m, c in creds.items()
                                     if m in SCRAM_MECHANISMS}

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._users)

    def describe(self) -> dict[str, list[tuple[str, int]]]:
        """{user: [(mechanism, iterations), ...]}: what DescribeUserScramCredentials tells."""
        with self._lock:
            return {u: sorted((m, c.iterations) for m, c in creds.items()) for u, creds in sorted(self._users.items())}

    def credential(self, name: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            return self._users.get(name, {}).get(mechanism)

    def add(self, name: str, password: str, mechanisms: tuple[str, ...] = tuple(SCRAM_MECHANISMS),
            iterations: int | None = None) -> None:
        """Add or replace a user: a credential per SCRAM mechanism (PLAIN checks against them)."""
        if not name:
            raise ValueError("a user needs a name")
        creds = {m: ScramCredential.from_password(m, password, iterations or self.iterations) for m in mechanisms}
        with self._lock:
            self._users.setdefault(name, {}).update(creds)
            self._forget(name)
            self._save()

    def upsert(self, name: str, mechanism: str, credential: ScramCredential) -> None:
        with self._lock:
            self._users.setdefault(name, {})[mechanism] = credential
            self._forget(name)
            self._save()

    def remove(self, name: str, mechanism: str | None = None) -> bool:
        """Remove a user (or one of its credentials); False if there was none."""
        with self._lock:
            creds = self._users.get(name)
            if creds is None or (mechanism is not None and mechanism not in creds):
                return False
            self._forget(name)
            if mechanism is None:
                del self._users[name]
            else:
                del creds[mechanism]
                if not creds:
                    del self._users[name]
            self._save()
            return True

    def verify_password(self, name: str, password: str) -> bool:
        """PLAIN: the password salts to the user's stored key (SCRAM-SHA-512's credential first)."""
        import hmac
        seen = (name, hmac.new(self._secret, password.encode(), "sha256").digest())
        with self._lock:
            if seen in self._verified:
                return True
            creds = dict(self._users.get(name, {}))
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            if mechanism in creds:
                ok = creds[mechanism].matches(mechanism, password)
                with self._lock:
                    if ok and self._users.get(name, {}).get(mechanism) == creds[mechanism]:   # not changed since
                        if len(self._verified) >= VERIFIED_CACHE:
                            self._verified.pop(next(iter(self._verified)))
                        self._verified[seen] = None
                return ok
        return False

    def _forget(self, name: str) -> None:
        """The user changed: its verified passwords no longer hold (called with the lock held)."""
        for key in [k for k in self._verified if k[0] == name]:
            del self._verified[key]

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {"users": {u: {m: c.to_json() for m, c in creds.items()} for u, creds in self._users.items()}}
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
