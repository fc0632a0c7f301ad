"""Sans-IO Kafka wire layer: framing, headers and message bodies.

Bodies are kafka-python 3's JSON-schema-driven ApiMessage classes (one codec engine);
this package adds framing, the supported-API table and the envelope around them. It knows
nothing of groups, topics or sockets.
"""
