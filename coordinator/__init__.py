"""The group coordinator: a deterministic, event-sourced state machine (no I/O, no wall clock)."""
