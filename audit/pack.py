"""The Python environment a cluster's executors need, packed for `spark.archives`.

    python -m tenure.audit.pack OUT.tar.gz

What an executor imports of the audit is `tenure` (shipped as a zip by the job itself) and its third-party
dependencies: kafka-python (pure Python), crc32c and pyarrow (C extensions, so they cannot travel in a zip
on `spark.submit.pyFiles`; pyarrow writes the offsets_history part files each read task writes itself).
Spark's own answer for dependencies with native code is a packed environment sent with `spark.archives`
(venv-pack or conda-pack), which is what this builds: a new virtual environment on this interpreter's
base Python with exactly the versions the driver runs (installed with pip, from the configured index or
wheel cache), packed with venv-pack. `tenure audit --python-env OUT.tar.gz` ships it; without --python-env,
`tenure audit --master spark://...` packs one itself once (`cached`, kept in ~/.cache/tenure) and ships that. The executors then
need nothing installed but a Python of the same version at the same path as this one's base interpreter
(a venv links to it); a conda-pack environment, which carries its interpreter, can be passed to
--python-env instead.
"""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

# distribution names of what the executors import (tenure.audit.read/fold and the storage/protocol code
# they run); pyspark's own worker code comes with Spark on the cluster
EXECUTOR_REQUIREMENTS = ("kafka-python", "crc32c", "pyarrow")


def requirements() -> list[str]:
    """The executors' requirements pinned to the driver's installed versions."""
    return [f"{name}=={version(name)}" for name in EXECUTOR_REQUIREMENTS]


def pack(out: str | Path) -> Path:
    import venv_pack

    out = Path(out).resolve()
    with tempfile.TemporaryDirectory(prefix="tenure-audit-env-") as tmp:
        env = Path(tmp) / "env"
        # the interpreter the driver's venv was made from; typeshed does not declare CPython's sys._base_executable
        base = sys._base_executable  # type: ignore[attr-defined]
        subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True)
        # pip's output only when it fails (its warnings about the machine's index settings are not ours)
        pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q",
                              "--disable-pip-version-check", *requirements()], capture_output=True, text=True)
        if pip.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(requirements())} failed: {(pip.stderr or pip.stdout)[-2000:]}")
        out.unlink(missing_ok=True)
        venv_pack.pack(prefix=str(env), output=str(out), verbose=False)
    return out


def cache_dir() -> Path:
    """Where `tenure audit` keeps the environments it packed: $XDG_CACHE_HOME/tenure, else ~/.cache/tenure."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tenure"


def cached(where: Path | None = None, note=lambda msg: None) -> Path:
    """The executors' environment for this driver (its Python and the pinned requirements), packed once and
    kept in the cache dir under a name that says what it holds: `tenure audit --master spark://...` without
    --python-env ships it. `note(msg)` is told before a (slow) build; an error of the build propagates."""
    where = cache_dir() if where is None else where
    base = getattr(sys, "_base_executable", sys.executable)
    key = hashlib.sha256("\n".join([sys.version, platform.machine(), base, *requirements()]).encode()).hexdigest()
    path = where / f"audit-env-py{sys.version_info[0]}.{sys.version_info[1]}-{key[:16]}.tar.gz"
    if path.is_file():
        return path
    where.mkdir(parents=True, exist_ok=True)
    note(f"packing the executors' Python environment ({', '.join(requirements())}) once, into {path}")
    tmp = path.with_name(f".{os.getpid()}.{path.name}")          # venv-pack reads the format from the name
    try:
        _pack_into(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _pack_into(out: Path) -> Path:
    return pack(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m tenure.audit.pack OUT.tar.gz", file=sys.stderr)
        return 2
    print(pack(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
