"""`python -m tenure serve` as a child process, for tests that must kill the server for real.

    with TenureProcess(data_dir, fsync="batch", segment_bytes=4096) as srv:
        srv.start()                  # waits for "tenure listening on HOST:PORT"
        srv.bootstrap                # "127.0.0.1:PORT"
        srv.kill()                   # SIGKILL: no shutdown code runs at all
        srv.start()                  # again, on the same data dir, on a new port (port=0 was asked)
        srv.start(port=srv.port)     # again, on the port it had
        srv.terminate()              # SIGTERM: graceful, returns the exit code
        srv.admin("/groups/g")       # the HTTP admin endpoint's JSON (on by default; a free port with --port 0)

`nofile=(soft, hard)` starts the child with that RLIMIT_NOFILE (e.g. to run it out of descriptors).

Each start appends the child's stderr (its log) to `stderr_path`; `stderr()` reads the part written
by the latest start. A child still running when the context exits is SIGKILLed.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

READY = re.compile(r"^tenure listening on (\S+):(\d+)$")
ADMIN = re.compile(r"admin endpoint on (http://[0-9.]+:[0-9]+)")


class ServerExited(RuntimeError):
    """The server process ended before it printed its ready line."""

    def __init__(self, returncode: int, stderr: str) -> None:
        super().__init__(f"tenure serve exited {returncode} before listening; stderr:\n{stderr}")
        self.returncode = returncode
        self.stderr = stderr


class TenureProcess:
    def __init__(self, data_dir: str | os.PathLike, *, fsync: str = "batch", segment_bytes: int | None = None,
                 port: int = 0, extra: tuple[str, ...] = (), stderr_path: str | os.PathLike | None = None,
                 nofile: tuple[int, int] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        self.request_port = port          # the port to ask for (0: any free one)
        self.port: int | None = None      # the port it listens on, once started
        self.extra = tuple(extra)
        self.nofile = nofile              # (soft, hard) RLIMIT_NOFILE for the child; None: inherited
        self.stderr_path = Path(stderr_path) if stderr_path else self.data_dir.parent / (self.data_dir.name + ".stderr")
        self.proc: subprocess.Popen | None = None
        self.host: str | None = None
        self._stderr_start = 0
        self._lines: queue.Queue = queue.Queue()

    # ------------------------------------------------------------------ life cycle
    def argv(self, port: int | None = None) -> list[str]:
        port = self.request_port if port is None else port
        a = [sys.executable, "-m", "tenure", "serve", "--port", str(port), "--data-dir", str(self.data_dir),
             "--fsync", self.fsync]
        if self.segment_bytes is not None:
            a += ["--segment-bytes", str(self.segment_bytes)]
        if not {"--admin-port", "--no-admin"} & set(self.extra):
            a += ["--admin-port", "0"]     # a restart on a fixed --port would otherwise try 9644 first
        return a + list(self.extra)

    def spawn(self, port: int | None = None) -> subprocess.Popen:
        """Start the child without waiting for it to listen (on `port`, default the constructor's)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        self._stderr_start = self.stderr_path.stat().st_size if self.stderr_path.exists() else 0
        err = open(self.stderr_path, "ab")
        try:
            self.proc = subprocess.Popen(self.argv(port), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=err, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                         preexec_fn=self._limit if self.nofile else None)
        finally:
            err.close()
        self._lines = queue.Queue()
        proc, lines = self.proc, self._lines

        def read() -> None:
            for line in proc.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)
        threading.Thread(target=read, name="tenure-stdout", daemon=True).start()
        return self.proc

    def start(self, port: int | None = None, timeout: float = 30) -> TenureProcess:
        """Spawn and wait for the ready line; raises ServerExited if the child ends first."""
        self.host = None
        self.spawn(port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                self.kill()
                raise AssertionError(
                    f"tenure serve did not listen within {timeout}s; stderr:\n{self.stderr()}") from None
            if line is None:
                rc = self.proc.wait(10)
                raise ServerExited(rc, self.stderr())
            m = READY.match(line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                return self

    def run_to_exit(self, timeout: float = 30) -> tuple[int, str]:
        """Start a server expected to refuse to start: (exit code, stderr of this run)."""
        self.spawn()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"tenure serve was expected to exit but kept running; stderr:\n{self.stderr()}") from None
        return rc, self.stderr()

    def _limit(self) -> None:
        """In the child before exec: its descriptor limit (the test process keeps its own)."""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 20) -> int:
        """SIGTERM (graceful shutdown) and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"tenure serve did not stop within {timeout}s of SIGTERM; stderr:\n{self.stderr()}") from None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def bootstrap(self) -> str:
        assert self.host is not None, "not started"
        return f"{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        """The HTTP admin endpoint of the latest start (as its log line says)."""
        found = ADMIN.findall(self.stderr())
        assert found, f"no admin endpoint in the server's log (--no-admin given?):\n{self.stderr()}"
        return found[-1]

    def admin(self, path: str):
        """GET the admin endpoint's `path` (e.g. "/groups/g") as JSON; None on 404."""
        import json
        import urllib.error
        import urllib.request
        try:
            with urllib.request.urlopen(self.admin_url + path, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def stderr(self) -> str:
        """What the latest start wrote on stderr so far."""
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(self._stderr_start)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> TenureProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
