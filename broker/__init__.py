"""The data plane: enough of a Kafka broker (one node, leader of every partition) for real clients."""
import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning
