"""Security: listeners and their security protocols, TLS, SASL authentication (PLAIN, SCRAM, OAUTHBEARER) and
the users it checks against. Sits beside protocol/: it knows frames and decoded requests, never sockets'
owners, topics or groups; the server's connection asks it who a client is (docs/security.md)."""
