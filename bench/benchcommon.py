"""Helpers the benchmark scripts share: waiting for `tenure serve`'s ready line, naming the tree."""
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
