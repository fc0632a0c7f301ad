"""JSON schemas (kafka-python format) for messages kafka-python does not ship: the coordinator records."""
