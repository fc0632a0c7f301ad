"""The data plane: enough of a Kafka broker (one node, leader of every partition) for real clients."""
