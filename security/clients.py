"""Client settings for a listener, ready to hand to each client a test uses: `ClientSettings(...).confluent()`
(librdkafka's names, also kcat's -X), `.kafka_python()` / `.aiokafka()` (keyword arguments), `.java()` (Java
kafka-clients properties). What the pytest plugin's `tenure_clients` fixture gives a test."""
from __future__ import annotations

from dataclasses import dataclass, replace

from .listeners import SASL_PLAINTEXT, SASL_SSL, SSL
from .oauth import unsecured_token


@dataclass(frozen=True)
class ClientSettings:
    bootstrap: str
    protocol: str                          # the listener's security protocol
    ca_file: str | None = None             # the CA a TLS client trusts
    mechanism: str | None = None           # SASL
    username: str | None = None
    password: str | None = None
    cert_file: str | None = None           # a client certificate (SSL with client auth)
    key_file: str | None = None
    keystore_file: str | None = None       # key + chain in one PEM file (Java's ssl.keystore.type=PEM)

    def as_user(self, username: str, password: str | None = None, mechanism: str | None = None) -> ClientSettings:
        return replace(self, username=username, password=password if password is not None else self.password,
                       mechanism=mechanism or self.mechanism)

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    def confluent(self) -> dict[str, str]:
        """librdkafka's configuration (confluent-kafka, kcat -X)."""
        out = {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol.lower()}
        if self.tls and self.ca_file:
            out["ssl.ca.location"] = self.ca_file
        if self.cert_file and self.key_file:
            out["ssl.certificate.location"], out["ssl.key.location"] = self.cert_file, self.key_file
        if self.sasl and self.mechanism:
            out["sasl.mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
                out["sasl.oauthbearer.config"] = f"principal={self.username}"
            else:
                out["sasl.username"], out["sasl.password"] = self.username or "", self.password or ""
        return out

    def kafka_python(self) -> dict:
        """kafka-python's keyword arguments."""
        out: dict = {"bootstrap_servers": self.bootstrap.split(","), "security_protocol": self.protocol}
        if self.tls:
            out.update(ssl_cafile=self.ca_file, ssl_check_hostname=True)
            if self.cert_file and self.key_file:
                out.update(ssl_certfile=self.cert_file, ssl_keyfile=self.key_file)
        if self.sasl and self.mechanism:
            out["sasl_mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                out["sasl_oauth_token_provider"] = _kafka_python_provider(self.username or "")
            else:
                out.update(sasl_plain_username=self.username, sasl_plain_password=self.password)
        return out

    def aiokafka(self) -> dict:
        """aiokafka's keyword arguments (an ssl.SSLContext for TLS)."""
        out: dict = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol}
        if self.tls:
            from aiokafka.helpers import create_ssl_context  # a test dependency, not the server's
            out["ssl_context"] = create_ssl_context(cafile=self.ca_file, certfile=self.cert_file,
                                                    keyfile=self.key_file)
        if self.sasl and self.mechanism:
            out["sasl_mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                out["sasl_oauth_token_provider"] = _aiokafka_provider(self.username or "")
            else:
                out.update(sasl_plain_username=self.username, sasl_plain_password=self.password)
        return out

    def java(self) -> dict[str, str]:
        """Java kafka-clients properties (PEM trust and key stores)."""
        out = {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol}
        if self.tls and self.ca_file:
            out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file})
        if self.keystore_file:
            out.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": self.keystore_file})
        if self.sasl and self.mechanism:
            out["sasl.mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                out["sasl.jaas.config"] = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                           f'required unsecuredLoginStringClaim_sub="{self.username}";')
            else:
                module = "plain.PlainLoginModule" if self.mechanism == "PLAIN" else "scram.ScramLoginModule"
                out["sasl.jaas.config"] = (f"org.apache.kafka.common.security.{module} required "
                                           f'username="{self.username}" password="{self.password}";')
        return out


def _kafka_python_provider(principal: str):
    """kafka-python's OAUTHBEARER token provider: an unsecured token for the principal."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return unsecured_token(principal)
    return Provider()


def _aiokafka_provider(principal: str):
    """aiokafka's OAUTHBEARER token provider (awaited): an unsecured token for the principal."""
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return unsecured_token(principal)
    return Provider()
