"""tenure: a wire-compatible Kafka test server built around static group membership (KIP-345).

`from tenure import ServerThread, ServerConfig` works; the server modules are imported only then, so
importing the package (as pytest does for the plugin) stays cheap."""
__version__ = "0.1.0"

_LAZY = {"ServerThread": "tenure.server", "AsyncServerThread": "tenure.server", "Server": "tenure.server",
         "ServerConfig": "tenure.config"}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tenure' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
