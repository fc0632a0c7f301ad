"""Sans-IO Kafka wire layer: framing, headers and message bodies.

Bodies are kafka-python 3's JSON-schema-driven ApiMessage classes (one codec engine);
this package adds framing, the supported-API table and the envelope around them. It knows
nothing of groups, topics or sockets.
"""

import warnings as _warnings

# kafka-python 3.0 reads its message schemas (and this package's: records.py, consumer_group_records.py,
# txn_records.py, consumer_group.py, whose classes structs.py builds) at import time with importlib.resources.read_text, which Python 3.11+ deprecates. tenure imports it
# here, once, with that one warning silenced, so a user's suite run with `filterwarnings = error` does
# not fail on tenure's imports. Every layer that uses kafka-python imports this package first (their
# __init__).
with _warnings.catch_warnings():
    _warnings.filterwarnings("ignore", message=r"(read|open)_text is deprecated", category=DeprecationWarning)
    import kafka  # noqa: F401,E402

    from . import consumer_group, records, txn_records  # noqa: F401,E402
