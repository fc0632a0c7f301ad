"""The names of SASL the server's settings and connections use without the SASL servers themselves: the mechanisms
tenure serves and the states of a connection's authentication (sasl.py, whose servers and the OAUTHBEARER
validator are imported when a server has a SASL listener: tenure/server/security.py)."""
from __future__ import annotations

PLAIN, OAUTHBEARER = "PLAIN", "OAUTHBEARER"
MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER)

# the states of SaslAuthenticator (sasl.py)
INITIAL, HANDSHAKE, AUTHENTICATE, COMPLETE, FAILED = "initial", "handshake", "authenticate", "complete", "failed"
