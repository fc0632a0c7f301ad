"""The server's security, built once per server from its config: the listeners every broker has (their names,
security protocols, addresses and, restarted, their ports), the TLS of the SSL and SASL_SSL listeners (the user's
certificate or a generated one), and what SASL connections authenticate with (the mechanisms, the users, the
OAUTHBEARER validator). lifecycle.py's `Server` asks it for each broker's endpoints and each new connection's
authenticator (docs/security.md)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tenure.broker.cluster import BrokerNode
from tenure.config import ServerConfig
from tenure.deferred import deferred
from tenure.security.listeners import SSL, parse_listeners

from .listener import Endpoint

if TYPE_CHECKING:
    from tenure.security.oauth import TokenValidator
    from tenure.security.sasl import SaslAuthenticator, SaslSettings
    from tenure.security.tls import ClientCert, ServerTls
    from tenure.security.users import UserStore

# the SASL servers and the OAUTHBEARER validator: imported when a SASL listener's first connection comes, or at
# start-up for a SASL listener with OAUTHBEARER (its JWKS file is checked then)
sasl = deferred("tenure.security.sasl")
oauth = deferred("tenure.security.oauth")
certificates = deferred("tenure.security.tls")   # TLS: with a TLS listener (SSL, SASL_SSL)


class ServerSecurity:
    """ValueError (naming the flag) for a listener, certificate or JWKS file that does not hold."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = c = config
        self.specs = parse_listeners(c.listeners, c.listener_security_protocol_map, c.host, c.port)
        self.tls = self._tls() if any(spec.tls for spec in self.specs) else None
        self.mechanisms = tuple(m.strip().upper() for m in c.sasl_mechanisms.split(",") if m.strip())
        self.validator: TokenValidator | None = None
        if any(spec.sasl for spec in self.specs) and "OAUTHBEARER" in self.mechanisms:
            self.validator = self._token_validator()     # a JWKS file that does not load: refused now
        self._sasl: SaslSettings | None = None

    def _tls(self) -> ServerTls:
        """The certificate of the TLS listeners: the user's files, or one generated with a throwaway CA in
        --tls-dir (default DATA_DIR/tls, else a new temporary dir)."""
        c = self.config
        if c.ssl_cert_file:
            return certificates.ServerTls.from_files(c.ssl_cert_file, c.ssl_key_file, c.ssl_ca_file)
        if c.ssl_key_file:
            raise ValueError("--ssl-key-file needs --ssl-cert-file")
        directory = c.tls_dir or (str(Path(c.data_dir) / "tls") if c.data_dir else None)
        hosts = [c.advertised_host or "", c.host, *(spec.host for spec in self.specs)]
        return certificates.ServerTls.generate(directory, hosts)

    def _token_validator(self) -> TokenValidator:
        c = self.config
        try:
            return oauth.TokenValidator(c.oauth_jwks_file, audience=c.oauth_audience, issuer=c.oauth_issuer)
        except (OSError, ValueError) as exc:
            raise ValueError(f"--oauth-jwks-file {c.oauth_jwks_file}: {exc}") from exc

    def endpoints(self, broker_id: int) -> list[Endpoint]:
        """Broker `broker_id`'s listeners: each spec's port + the broker's index (0: a free one), or the ports a
        restart keeps; without --listener the one listener's port is the broker's (--port, broker_ports)."""
        c, out = self.config, []
        for i, spec in enumerate(self.specs):
            port = spec.port + broker_id if spec.port else 0
            if c.listener_ports is not None:
                port = c.listener_ports[broker_id][i]
            elif i == 0 and not c.listeners:
                port = c.ports()[broker_id]
            tls = None
            if spec.tls:
                assert self.tls is not None
                tls = self.tls.context(c.ssl_client_auth if spec.protocol == SSL else "none")
            out.append(Endpoint(spec.name, spec.protocol, spec.host, port, tls))
        return out

    def bootstrap(self, brokers: list[BrokerNode]) -> dict[str, str]:
        """{listener name: "H:P1,H:P2,..."}: every broker's address on each listener."""
        return {spec.name: ",".join(f"{h}:{p}" for h, p in (b.address(spec.name) for b in brokers))
                for spec in self.specs}

    @property
    def ca_file(self) -> str | None:
        return self.tls.ca_file if self.tls is not None else None

    def issue_client_cert(self, common_name: str, directory: str | None = None) -> ClientCert:
        if self.tls is None:
            raise RuntimeError("this server has no TLS listener")
        return self.tls.issue_client_cert(common_name, directory)

    def authenticator(self, protocol: str, users: Callable[[], UserStore],
                      now_ms: Callable[[], int]) -> SaslAuthenticator | None:
        """A new connection's SASL state on a SASL listener (None on the others)."""
        if not protocol.startswith("SASL_"):
            return None
        if self._sasl is None:
            c = self.config
            self._sasl = sasl.SaslSettings(users(), self.mechanisms, self.validator or oauth.TokenValidator(),
                                           c.connections_max_reauth_ms, c.sasl_max_receive_bytes)
        return sasl.SaslAuthenticator(self._sasl, now_ms)

    def static_configs(self, endpoints: list[Endpoint]) -> dict[str, str]:
        """The broker configs DescribeConfigs reports for the listeners."""
        return {"listeners": ",".join(f"{ep.name}://{ep.host}:{ep.port}" for ep in endpoints),
                "listener.security.protocol.map": ",".join(f"{s.name}:{s.protocol}" for s in self.specs)}
