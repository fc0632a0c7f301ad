"""tenure.catchup: the KIP-333 catch-up consumer (fresh data first after a crash, the lag replayed in
parallel, nothing lost) over confluent-kafka. Install with `pip install tenure[catchup]`; see
docs/catchup.md."""
from tenure.catchup.consumer import CatchUpConsumer

__all__ = ["CatchUpConsumer"]
