"""`scripts/setup.sh`, the README's first command, does only what is not done yet and prints nothing alarming:
pip runs when .venv/ has no install of this pyproject.toml for the mode asked (an editable install needs no
reinstall for a code change), its output is kept in .venv/setup.log and shown only when pip fails.

The hermetic tests run the script in a copy of the repo whose .venv/bin/python records the pip calls it is
asked for and runs everything else with this interpreter; the last test runs the real script on this checkout."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
# records pip calls; every other use runs the real interpreter
if [ "${1:-}" = "-m" ] && [ "${2:-}" = "pip" ]; then
  echo "${*:3}" >>"$(dirname "$0")/../pip-calls"
  echo "  pip's noisy output: BuildBackendWarning: Editable installation."
  if [ -f "$(dirname "$0")/../pip-fails" ]; then echo "ERROR: no matching distribution"; exit 1; fi
  printf '#!/bin/sh\\n' >"$(dirname "$0")/tenure"; chmod +x "$(dirname "$0")/tenure"
  exit 0
fi
exec "%s" "$@"
"""


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(FAKE_PYTHON % sys.executable)
    (bin_ / "python").chmod(0o755)
    return tmp_path


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    return subprocess.run(["bash", str(repo / "scripts" / "setup.sh"), *args], capture_output=True, text=True,
                          timeout=60, env=env)


def pip_calls(repo: Path) -> list[str]:
    calls = repo / ".venv" / "pip-calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_a_second_run_installs_nothing_and_prints_nothing(repo):
    first = run(repo)
    assert first.returncode == 0, first.stderr
    assert pip_calls(repo) == ["install --upgrade pip", "install -e ."]
    assert "BuildBackendWarning" not in first.stdout + first.stderr       # pip's output went to the log
    assert "BuildBackendWarning" in (repo / ".venv" / "setup.log").read_text()
    assert first.stderr.splitlines() == ["setup: installing tenure into .venv/ (pip's output goes to .venv/setup.log)"]
    second = run(repo)
    assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
    assert len(pip_calls(repo)) == 2


def test_a_changed_pyproject_or_a_larger_mode_installs_again_a_smaller_mode_does_not(repo):
    assert run(repo, "audit").returncode == 0
    assert pip_calls(repo)[-1] == "install -e .[audit]"
    assert run(repo).returncode == 0 and len(pip_calls(repo)) == 2          # the audit install holds the server's
    (repo / "pyproject.toml").write_text((repo / "pyproject.toml").read_text() + "\n# a new dependency\n")
    assert run(repo).returncode == 0
    assert pip_calls(repo)[-1] == "install -e ."
    assert run(repo, "audit").returncode == 0
    assert pip_calls(repo)[-1] == "install -e .[audit]"
    assert run(repo, "audit").returncode == 0 and len(pip_calls(repo)) == 6


def test_a_failing_pip_shows_its_output_and_fails(repo):
    (repo / ".venv" / "pip-fails").write_text("")
    p = run(repo)
    assert p.returncode == 1
    assert "ERROR: no matching distribution" in p.stderr and "setup: pip failed" in p.stderr
    (repo / ".venv" / "pip-fails").unlink()
    assert run(repo).returncode == 0                        # nothing was stamped: the next run installs
    assert pip_calls(repo)[-1] == "install -e ."


def test_an_unknown_mode_is_refused(repo):
    p = run(repo, "tets")
    assert p.returncode == 2 and "unknown mode 'tets'" in p.stderr and pip_calls(repo) == []


def test_the_real_script_on_this_checkout_is_a_quiet_no_op_once_set_up():
    subprocess.run(["scripts/setup.sh", "test"], cwd=ROOT, check=True, capture_output=True, timeout=600)
    start = time.monotonic()
    p = subprocess.run(["scripts/setup.sh", "test"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert took < 3.0, took
