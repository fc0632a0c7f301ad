"""Security: who a client is and what it may do. Listeners and their security protocols, TLS, SASL
authentication (PLAIN, SCRAM, OAUTHBEARER) and the users it checks against; Kafka's authorizer (ACLs). Sits beside
protocol/: it knows frames and decoded requests, never sockets' owners, topics or groups; the server's connection
asks it who a client is, the access hook and the handlers what that client may do (docs/security.md)."""
