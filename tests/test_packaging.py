"""Building tenure (what `scripts/setup.sh` and `pip install` do) prints no setuptools warning: the
license is an SPDX expression string, which setuptools reads from version 77 on (the TOML-table form
made every install print ~70 lines of deprecation warnings)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_is_an_spdx_string_and_the_build_asks_for_a_setuptools_that_reads_it():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in data["build-system"]["requires"]


@pytest.mark.timeout(300)
def test_building_the_wheel_prints_no_setuptools_warning(tmp_path):
    # from a copy of what the build reads, so the build leaves no build/ directory in the checkout
    src, out = tmp_path / "src", tmp_path / "wheels"
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for name in ["pyproject.toml", data["project"]["readme"]]:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, src / name)
    for folder in set(data["tool"]["setuptools"]["package-dir"].values()):
        shutil.copytree(ROOT / folder, src / folder, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=280)
    assert p.returncode == 0, p.stderr[-3000:]
    assert [w.name for w in out.iterdir()] == ["tenure-0.1.0-py3-none-any.whl"]
    out = p.stdout + p.stderr
    assert "SetuptoolsDeprecationWarning" not in out and "project.license" not in out, out[-3000:]


def test_every_package_folder_is_in_the_wheel():
    """Each folder of the product with an __init__.py is a package setuptools is told of (packages and
    package-dir): a new one left out installs a tenure that fails at import (the Docker image showed it)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, dirs = set(data["packages"]), data["package-dir"]
    layers = {name: ROOT / folder for name, folder in dirs.items() if name.count(".") <= 1}   # tenure, tenure.X
    found = set()
    for name, folder in layers.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            if "__pycache__" in rel or (name == "tenure" and rel and f"tenure.{rel[0]}" in layers):
                continue
            found.add(".".join([name, *rel]))
    assert found - listed == set(), f"not in [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed - found == set(), f"listed but not a package folder: {sorted(listed - found)}"
