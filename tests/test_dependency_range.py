"""tenure depends on a range of kafka-python versions (pyproject.toml), not one pin, so it does not
override a project's own kafka-python. Both ends of the range are tested: the newest is what a fresh
`scripts/setup.sh test` installs and the whole suite runs on; this test runs the codec and coordinator
tests (every message and record tenure encodes or decodes with kafka-python) on the lowest version
of the range, installed apart in .cache/ and put first on the path of a pytest of its own."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(600)


def kafka_python_range() -> tuple[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [spec] = [d for d in deps if re.match(r"kafka-python\b", d)]
    m = re.fullmatch(r"kafka-python>=([\d.]+),<([\d.]+)", spec.replace(" ", ""))
    assert m, f"kafka-python must be a tested range >=LOW,<HIGH, not {spec!r}"
    return m.group(1), m.group(2)


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def test_the_installed_kafka_python_is_in_the_range():
    low, high = kafka_python_range()
    assert _key(low) <= _key(version("kafka-python")) < _key(high)


def test_the_codec_and_coordinator_tests_pass_on_the_lowest_kafka_python():
    low, _ = kafka_python_range()
    target = ROOT / ".cache" / f"kafka-python-{low}"
    if not (target / "kafka").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        f"kafka-python=={low}"], check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))}
    seen = subprocess.run([sys.executable, "-c", "import kafka; print(kafka.__version__)"], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert seen == low
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/protocol", "tests/coordinator"], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=540)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
