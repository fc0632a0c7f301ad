"""Run `tenure serve` from a given source tree, so a bench compares two trees in one run (this one and, say, a
`git worktree` of main as the baseline) with the same interpreter and the same installed dependencies.

The venv's editable install maps the `tenure.*` packages to the folders of the tree it was installed from;
`serve_argv(tree, ...)` starts an interpreter that first maps them to `tree`'s folders (the package-dir
table of `tree`'s pyproject.toml, as setuptools reads it) and then runs `python -m tenure ARGS`. Both trees
are started through the same launcher, so its small cost is the same on both sides.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# the launcher: argv[1] is the tree; the rest is tenure's command line
_LAUNCHER = r"""
import sys, tomllib, runpy, importlib.util
tree = sys.argv.pop(1)
with open(tree + "/pyproject.toml", "rb") as f:
    dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
MAP = {name: tree + "/" + folder for name, folder in dirs.items()}
class TreeFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        folder = MAP.get(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(name, folder + "/__init__.py",
                                                      submodule_search_locations=[folder])
sys.meta_path.insert(0, TreeFinder)
sys.argv[0] = "tenure"
runpy.run_module("tenure", run_name="__main__", alter_sys=True)
"""


def serve_argv(tree: str | os.PathLike, *args: str) -> list[str]:
    """The command line that runs `python -m tenure ARGS` from the source tree `tree`."""
    return [sys.executable, "-c", _LAUNCHER, str(Path(tree).resolve()), *args]


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
