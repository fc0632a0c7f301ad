"""Helpers the benchmark scripts share: waiting for `tenure serve`'s ready line, naming the tree, a process's
memory, the __consumer_offsets segment files and dropping their pages from the page cache."""
from __future__ import annotations

import os
import re
import select
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
READY = re.compile(r"^tenure listening on (\S+:\d+)$")


def wait_ready_line(proc: subprocess.Popen, timeout: float, poll_s: float = 0.2) -> tuple[str | None, bytes]:
    """Read the server's stdout until `tenure listening on HOST:PORT` (returns HOST:PORT), the process
    exits, its stdout closes, or `timeout` passes (returns None); also returns what was read."""
    buf, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        r, _, _ = select.select([proc.stdout], [], [], poll_s)
        if r:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            for line in buf.decode(errors="replace").splitlines():
                m = READY.match(line.strip())
                if m:
                    return m.group(1), buf
    return None, buf


def tree_version() -> str:
    """The repository's commit, and whether the working tree differs from it (others edit it too)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{head}{' + uncommitted changes' if dirty else ''}" if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM of a process in kB (Linux /proc); {} if it is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def mib(kb: float | None) -> str:
    return "-" if kb is None else f"{kb / 1024:,.0f} MiB"


def segment_files(data_dir: Path) -> list[Path]:
    """The __consumer_offsets segment files of a data dir (the caller has put the repository on sys.path)."""
    from tenure.protocol.internal_topics import OFFSETS_TOPIC
    return sorted(data_dir.glob(f"{OFFSETS_TOPIC}-*/*.log"))


def drop_cache(data_dir: Path) -> None:
    """Ask the kernel to drop the segment files' clean pages (no root needed; they were fsynced)."""
    for p in segment_files(data_dir):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def bytecode_env(python: str, mode: str) -> dict[str, str]:
    """The environment to run `python`'s tenure in. "cached": PYTHONDONTWRITEBYTECODE unset and PYTHONPYCACHEPREFIX
    pointed at a new temporary directory that is filled first with the bytecode of every module of the tree that
    `python` imports tenure from (compileall), as an installed package or a developer's checkout has it; the parts a
    server imports on first use (tenure/deferred.py) are then loaded, not compiled, when a request first needs them.
    "env": the environment as inherited (this repository's sandbox sets PYTHONDONTWRITEBYTECODE, so those parts are
    compiled from source at their first use, on the server's loop)."""
    env = dict(os.environ)
    if mode == "env":
        return env
    import tempfile
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="tenure-bench-pycache-")
    subprocess.run([python, "-c", "import compileall, os, re, tenure; "
                    "root = os.path.dirname(os.path.dirname(os.path.abspath(tenure.__file__))); "
                    "compileall.compile_dir(root, quiet=1, rx=re.compile(r'/(\\.venv|\\.git|tests|\\.cache)/'))"],
                   check=True, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL)
    return env
