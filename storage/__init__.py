"""The log engine: partition logs of Kafka RecordBatch v2 behind one `Log` interface."""
import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning

from .batch import BatchHeader, InvalidBatch, parse_batches, stamp_log_append_time
from .log import Log, MemoryLog

__all__ = ["BatchHeader", "InvalidBatch", "parse_batches", "stamp_log_append_time", "Log", "MemoryLog"]
