"""Sans-IO Kafka wire layer: framing, headers and message bodies.

Bodies are kafka-python 3's JSON-schema-driven ApiMessage classes (one codec engine);
this package adds framing, the supported-API table and the envelope around them. It knows
nothing of groups, topics or sockets.
"""

import importlib.util as _importlib_util
import sys as _sys
import threading as _threading
import warnings as _warnings

from tenure.gcpause import gc_paused as _gc_paused


def _quietly(fn):
    """Run fn with kafka-python's import-time deprecation warning silenced (see below), and automatic collection
    held off: what it imports (modules, kafka-python's schema classes) lives as long as the process, which ~20
    young-generation collections would otherwise walk while it is made (tenure/gcpause.py)."""
    with _warnings.catch_warnings(), _gc_paused():
        _warnings.filterwarnings("ignore", message=r"(read|open)_text is deprecated", category=DeprecationWarning)
        return fn()


def _defer_package(package: str, *preload: tuple[str, tuple[str, ...]]) -> None:
    """Make `package` importable without running its `__init__`. The package module is created from its own spec and
    put in `sys.modules` unexecuted; its submodules import as usual. `preload`: (a submodule, names) pairs: those names
    of the package are taken from those submodules at once. The first time anything asks the package for another
    name its `__init__` defines, that `__init__` runs, once, and the name is there: code that imports tenure and
    then uses the package sees it as it always is.

    kafka-python's `__init__` imports its whole client (admin, consumer, producer, networking: about a fifth of the
    server's start-up), which tenure never uses; crc32c's reads its own version with importlib.metadata (which
    imports the email package) while tenure only calls its C functions."""
    if package in _sys.modules:
        return
    spec = _importlib_util.find_spec(package)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = _importlib_util.module_from_spec(spec)
    loader = spec.loader
    lock = _threading.RLock()       # one thread runs the __init__; the others wait for it, then look again
    running: list[bool] = []        # non-empty while the __init__ runs (on the thread holding the lock)

    def __getattr__(name: str):
        if name.startswith("__") and name not in ("__version__", "__all__"):
            raise AttributeError(name)
        with lock:
            if "__getattr__" in vars(module):
                if running:         # asked by the __init__ itself (`from kafka import errors`): the import
                    raise AttributeError(name)      # system then imports the submodule, as it always does
                running.append(True)
                try:
                    _quietly(lambda: loader.exec_module(module))
                finally:
                    running.clear()
                del vars(module)["__getattr__"]     # from now on, plain attribute lookup
        try:
            return vars(module)[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    vars(module)["__getattr__"] = __getattr__      # module-level __getattr__ (PEP 562)
    _sys.modules[package] = module
    parent, _, child = package.rpartition(".")
    if parent in _sys.modules:                      # `import kafka.record` then `kafka.record.X`: the attribute
        setattr(_sys.modules[parent], child, module)    # the import system binds on the parent package
    try:
        for submodule, names in preload:
            __import__(f"{package}.{submodule}")    # (not importlib.import_module: `-X importtime` sees this)
            source = _sys.modules[f"{package}.{submodule}"]
            for name in names:
                vars(module)[name] = getattr(source, name)
    except (ImportError, AttributeError):           # another release of the package: import it whole
        del _sys.modules[package]
        if parent in _sys.modules and vars(_sys.modules[parent]).get(child) is module:
            delattr(_sys.modules[parent], child)


# kafka-python 3.0 reads its message schemas (and this package's: records.py, consumer_group_records.py,
# txn_records.py, consumer_group.py, the share groups' share_group*.py and share_state_records.py, whose classes
# structs.py builds) at import time with
# importlib.resources.read_text, which Python 3.11+ deprecates. tenure imports them here, once, with that one
# warning silenced, so a user's suite run with `filterwarnings = error` does not fail on tenure's imports. Every
# layer that uses kafka-python imports this package first (their __init__).
_defer_package("kafka")
_defer_package("crc32c", ("_crc32c", ("crc32c", "crc32", "big_endian", "hardware_based")))
# kafka-python's record package, whose `__init__` imports its reader of every message format (MemoryRecords, with
# the legacy formats' classes): the server takes the v2 batch classes from `kafka.record.default_records`; the old
# formats' modules are imported at the first old Produce or Fetch (broker/message_format.py)
_defer_package("kafka.record")
# kafka-python's API packages, whose `__init__` imports every API's classes (each built from its JSON schema): their
# modules are imported one by one, each served API's by protocol/apis.py the first time a request of it comes.
# The names preloaded are the ones kafka-python's own broker_version_data (the releases' API versions, which
# releases.py reads) takes from the packages; `from kafka.protocol.admin import X` of any other name imports the
# whole package, once, as it always did.


def _defer_api_packages() -> None:
    _defer_package("kafka.protocol.admin", ("groups", ("ListGroupsRequest",)))
    _defer_package("kafka.protocol.consumer", ("group", ("OffsetFetchRequest",)))
    _defer_package("kafka.protocol.metadata", ("find_coordinator", ("FindCoordinatorRequest",)),
                   ("metadata", ("MetadataRequest",)))
    _defer_package("kafka.protocol.producer")      # Produce's and the transactions' APIs: each on first use


_quietly(_defer_api_packages)


def _import_codecs() -> None:
    # the kafka-python modules the server's layers import at their own import, loaded here, quietly, not later
    # inside a user's test; the other APIs' classes are imported, as quietly, when first used (apis.ApiClasses)
    import kafka.protocol.admin.groups  # noqa: F401
    import kafka.protocol.api_header  # noqa: F401
    import kafka.protocol.api_message  # noqa: F401
    import kafka.protocol.consumer.group  # noqa: F401

    from . import consumer_group, records, share_group  # noqa: F401


_quietly(_import_codecs)
