"""The control surface of a running server: fault injection, read-only views, metrics, the HTTP admin endpoint
and the pytest plugin."""
