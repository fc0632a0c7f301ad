"""Run `tenure serve` from a given source tree, so a bench compares two trees in one run (this one and, say, a
`git worktree` of main as the baseline) with the same interpreter and the same installed dependencies.

The venv's editable install maps the `tenure.*` packages to the folders of the tree it was installed from;
`serve_argv(tree, ...)` starts an interpreter that first maps them to `tree`'s folders (the package-dir
table of `tree`'s pyproject.toml, as setuptools reads it) and then runs `python -m tenure ARGS`; `python_argv(tree,
code)` runs `code` so. Both trees
are started through the same launcher, so its small cost is the same on both sides.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# the finder, ahead of the editable install's: the tree's packages from its folders (only modules already loaded at
# interpreter start are used, so the launcher adds no import of its own to what is measured)
_FINDER = r"""
import sys
from _frozen_importlib_external import spec_from_file_location as _spec
MAP = %r
class TreeFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        folder = MAP.get(name)
        return None if folder is None else _spec(name, folder + "/__init__.py", submodule_search_locations=[folder])
sys.meta_path.insert(0, TreeFinder)
"""
_RUN_TENURE = """
import runpy
sys.argv[0] = "tenure"
runpy.run_module("tenure", run_name="__main__", alter_sys=True)
"""


def packages(tree: str | os.PathLike) -> dict[str, str]:
    """The tree's installed package name -> its folder (pyproject.toml's package-dir, as setuptools reads it)."""
    root = Path(tree).resolve()
    with open(root / "pyproject.toml", "rb") as f:
        dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {name: str(root / folder) for name, folder in dirs.items()}


def serve_argv(tree: str | os.PathLike, *args: str, prelude: str = "") -> list[str]:
    """The command line that runs `python -m tenure ARGS` from the source tree `tree` (`prelude`: Python code run
    first, e.g. a bench's timer of garbage collections)."""
    return [sys.executable, "-c", _FINDER % packages(tree) + prelude + "\n" + _RUN_TENURE, *args]


def python_argv(tree: str | os.PathLike, code: str) -> list[str]:
    """The command line that runs `python -c CODE` with `tenure` imported from the source tree `tree`."""
    return [sys.executable, "-c", _FINDER % packages(tree) + code]


def tree_label(tree: str | os.PathLike) -> str:
    """`tree`'s commit (short), with '+' if its working tree has changes."""
    try:
        head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{head}{'+' if dirty else ''}" if head else str(tree)
    except (OSError, subprocess.SubprocessError):
        return str(tree)
