"""Deferred modules: what a plain `tenure serve` does not need to start, imported the first time one of their names
is used. A leaf module every layer may import (it imports nothing of tenure's until a deferred module is used).

A deferred module is named once, beside its user's other imports: `txn_runtime =
deferred("tenure.coordinator.txn_runtime")`, then `txn_runtime.TransactionRuntime(...)` where the part is made
- at its first request, or at start-up when the data dir holds its internal topic (tenure/server/build.py's
`TransactionCoordinatorHandle.start`, `ShareStateHandle.start`), at the log cleaner's first pass
(tenure/server/cleaner.py), at the first ACL request or the first ACL a control or `--acl` names, at a shard's first
use of a group kind registered as a `LazyKind` (coordinator/kinds.py), at a SASL listener's first connection
(tenure/server/security.py), when a data dir is opened (tenure/server/build.py). Until then the
module is not imported (tests/test_startup_imports.py keeps each one on its deny list); from then on every name
is the module's own. Its classes are named for types through `TYPE_CHECKING` imports. kafka-python's schema
reads are silenced while it is imported, as at the server's own import (protocol/structs.py
`quiet_schema_reads`), so a suite run with `filterwarnings = error` sees no warning from it. The parts deferred
and when each is imported: docs/README.md, "Start-up: the parts imported on first use"."""
from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import Any


class Deferred:
    """A module imported on the first use of one of its names (then every name is the module's own)."""

    __slots__ = ("name", "_module")

    def __init__(self, name: str) -> None:
        self.name = name
        self._module: ModuleType | None = None

    def __repr__(self) -> str:
        return f"deferred({self.name!r}, {'imported' if self._module is not None else 'not imported yet'})"

    @property
    def module(self) -> ModuleType:
        module = self._module
        if module is None:                 # the import system's own lock: threads asking at once get one module
            from tenure.protocol.structs import quiet_schema_reads  # (a leaf: nothing of tenure's at import)
            with quiet_schema_reads():
                module = self._module = import_module(self.name)
        return module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


def deferred(name: str) -> Any:
    """`name`'s module, imported the first time one of its names is asked (typed Any: annotate with the module's
    own classes through `TYPE_CHECKING` imports)."""
    return Deferred(name)
