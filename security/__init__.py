"""Who may do what: Kafka's authorizer (ACLs) and, beside it, authentication. See docs/security.md."""
