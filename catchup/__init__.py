"""tenure.catchup: the KIP-333 catch-up consumer (fresh data first after a crash, the lag replayed in
parallel, nothing lost) over confluent-kafka. Install with `pip install tenure[catchup]`; see
docs/catchup.md.

`CatchUpConsumer` is imported on first use, so `tenure.catchup.ranges` (pure Python: the range tokens)
imports without confluent-kafka - the audit's executors fold the tokens with it."""
__all__ = ["CatchUpConsumer"]


def __getattr__(name: str):
    if name == "CatchUpConsumer":
        from tenure.catchup.consumer import CatchUpConsumer
        return CatchUpConsumer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
