"""Listeners as Kafka names them: `NAME://HOST:PORT`, each with a security protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL) - its own name when it is one of those, else from the security-protocol map
(Kafka's listener.security.protocol.map, `NAME:PROTOCOL,...`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
HANDSHAKE_TIMEOUT_S = 10.0             # a TLS listener's handshake (security/tls.py makes its context)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_SPEC = re.compile(r"^(?P<name>[^:/]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


@dataclass(frozen=True)
class ListenerSpec:
    """One listener of every broker: its name, security protocol, the address it binds and the first
    broker's port (broker i takes port + i; 0: a free one each)."""
    name: str
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)


def parse_protocol_map(text: str | None) -> dict[str, str]:
    """`NAME:PROTOCOL,...` -> {NAME: PROTOCOL}; ValueError for a protocol Kafka does not have."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not _NAME.match(name) or proto not in PROTOCOLS:
            raise ValueError(f"--listener-security-protocol-map: {item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                             f"{', '.join(PROTOCOLS)}")
        out[name] = proto
    return out


def parse_listener(text: str, protocol_map: dict[str, str], default_host: str) -> ListenerSpec:
    """`NAME://HOST:PORT` (HOST empty: `default_host`); a bare `NAME` is NAME://default_host:0."""
    text = text.strip()
    if "://" not in text:
        text = f"{text}://:0"
    m = _SPEC.match(text)
    if m is None or not _NAME.match(m["name"]):
        raise ValueError(f"--listener {text!r}: expected NAME://HOST:PORT (e.g. SASL_SSL://127.0.0.1:9093)")
    name = m["name"].upper()
    protocol = protocol_map.get(name, name if name in PROTOCOLS else None)
    if protocol is None:
        raise ValueError(f"--listener {text!r}: {name} is not a security protocol; name its protocol with "
                         f"--listener-security-protocol-map {name}:SASL_SSL (or PLAINTEXT, SSL, SASL_PLAINTEXT)")
    port = int(m["port"])
    if port > 65535:
        raise ValueError(f"--listener {text!r}: port {port} is out of range")
    return ListenerSpec(name, protocol, m["host"].strip("[]") or default_host, port)


def parse_listeners(specs: tuple[str, ...] | None, protocol_map: str | None, default_host: str,
                    default_port: int) -> list[ListenerSpec]:
    """Every listener; none given: one PLAINTEXT listener on `default_host`:`default_port` (tenure's default).
    Names must be unique, as Kafka requires."""
    pmap = parse_protocol_map(protocol_map)
    if not specs:
        return [ListenerSpec(PLAINTEXT, pmap.get(PLAINTEXT, PLAINTEXT), default_host, default_port)]
    out = [parse_listener(s, pmap, default_host) for s in specs]
    names = [s.name for s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"--listener: each listener needs its own name; {', '.join(dup)} given more than once")
    fixed = [(s.host, s.port) for s in out if s.port]
    if len(set(fixed)) != len(fixed):
        raise ValueError("--listener: two listeners on the same host and port")
    return out
