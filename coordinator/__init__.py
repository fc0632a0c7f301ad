"""The group coordinator: a deterministic, event-sourced state machine (no I/O, no wall clock)."""
import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning
