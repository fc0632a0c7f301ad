"""tenure: a wire-compatible Kafka test server built around static group membership (KIP-345)."""
__version__ = "0.1.0"
