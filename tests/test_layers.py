"""The layers import downwards only, and the seams stay seams: read from the product's source (ast), so a change
that crosses a layer fails here whatever it runs.

protocol/ and storage/ are the bottom (protocol: the wire, the records, the internal topics' names and hash, the
request context; storage: the log engine); security/ (the authorizer) sits on them only; the coordinator and the broker sit on them and never import each
other or the control surface; tenure/control/ reads a running server through its public operations and never
imports the coordinator or the broker; tenure/server/ is where they meet (the one place that builds the server).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {                     # folder -> the installed package it is
    "protocol": "tenure.protocol", "storage": "tenure.storage", "broker": "tenure.broker",
    "coordinator": "tenure.coordinator", "audit": "tenure.audit", "catchup": "tenure.catchup",
    "tenure/control": "tenure.control", "tenure/server": "tenure.server", "tenure/tools": "tenure.tools",
    "security": "tenure.security",
}
FORBIDDEN = {                  # a layer -> the packages it must not import
    "protocol": ("tenure.storage", "tenure.broker", "tenure.coordinator", "tenure.control", "tenure.server",
                 "tenure.tools", "tenure.audit"),
    "storage": ("tenure.broker", "tenure.coordinator", "tenure.control", "tenure.server", "tenure.tools",
                "tenure.audit"),
    "coordinator": ("tenure.broker", "tenure.control", "tenure.server", "tenure.tools", "tenure.audit"),
    "broker": ("tenure.coordinator", "tenure.control", "tenure.server", "tenure.tools", "tenure.audit"),
    "tenure/control": ("tenure.coordinator", "tenure.broker", "tenure.tools", "tenure.audit"),
    # who a client is and what it may do: over the wire and the log engine's files only, asked by the server's
    # connection and, through the context, by the handlers
    "security": ("tenure.broker", "tenure.coordinator", "tenure.control", "tenure.server", "tenure.tools",
                 "tenure.audit"),
}


def product_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, function-level ones included."""
    rel = path.relative_to(ROOT).as_posix()
    folder = next(f for f in sorted(LAYERS, key=len, reverse=True) if rel.startswith(f + "/"))
    inner = path.relative_to(ROOT / folder).parent.parts
    here = [LAYERS[folder], *inner]                       # the package the file is in
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            out.append((node.lineno, module))
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_no_layer_above_or_beside_it(layer):
    crossings = [f"{path.relative_to(ROOT)}:{line} imports {module}"
                 for path in product_files(layer) for line, module in imports(path)
                 if any(module == p or module.startswith(p + ".") for p in FORBIDDEN[layer])]
    assert crossings == []


def test_no_ambient_request_state():
    """The request context carries the broker a request came in on and everything else a handler needs: no
    context variable holds request state behind the handlers' backs."""
    found = [f"{path.relative_to(ROOT)}: an ambient context variable"
             for folder in ("protocol", "storage", "broker", "coordinator", "tenure", "audit", "catchup", "security")
             for path in product_files(folder)
             if "CURRENT_" + "BROKER" in path.read_text() or "ContextVar(" in path.read_text()]
    assert found == []
