"""The log engine: partition logs of Kafka RecordBatch v2 behind one `Log` interface."""
from .batch import BatchHeader, InvalidBatch, parse_batches
from .log import Log, MemoryLog

__all__ = ["BatchHeader", "InvalidBatch", "parse_batches", "Log", "MemoryLog"]
