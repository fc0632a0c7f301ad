"""Helpers for running the Java kafka-clients 4.3 test programs in tests/java/.

    jar_dir()                      -> Path of the directory holding the jars
    compile_java(build_dir)        -> classpath string (build_dir + all jars)
    run_java(main_class, *args)    -> list of JSON objects printed on stdout

Java being unavailable is a test failure, never a skip: every problem raises
RuntimeError (JavaError for a program that exited non-zero).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JAVA_SRC = REPO / "tests" / "java"
FETCH_SCRIPT = REPO / "scripts" / "fetch-jars.sh"
KAFKA_JAR = "kafka-clients-4.3.0.jar"
DEFAULT_BUILD_DIR = REPO / ".cache" / "java-classes"

_lock = threading.Lock()
_jar_dir: Path | None = None
_classpaths: dict[Path, str] = {}


class JavaError(RuntimeError):
    """A Java program exited non-zero (or timed out)."""

    def __init__(self, message: str, *, returncode: int | None, stdout: str,
                 stderr: str, lines: list[dict]):
        super().__init__(message)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.lines = lines


def jar_dir() -> Path:
    """Directory with kafka-clients-4.3.0.jar and friends, fetching it if needed.

    $TENURE_JARS overrides the default <repo>/.cache/jars.
    """
    global _jar_dir
    with _lock:
        if _jar_dir is not None:
            return _jar_dir
        d = Path(os.environ.get("TENURE_JARS") or REPO / ".cache" / "jars")
        if not (d / KAFKA_JAR).is_file() or not any(d.glob("jackson-databind-*.jar")):    # OAUTHBEARER needs it
            env = dict(os.environ, PYTHON=sys.executable)
            proc = subprocess.run(["bash", str(FETCH_SCRIPT), str(d)], env=env,
                                  capture_output=True, text=True)
            if proc.returncode != 0 or not (d / KAFKA_JAR).is_file():
                raise RuntimeError(
                    f"Java kafka-clients jar not available: {d / KAFKA_JAR} is missing "
                    f"and {FETCH_SCRIPT} exited {proc.returncode}.\n"
                    f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        _jar_dir = d
        return d


def _tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"`{name}` not found on PATH (and not in $JAVA_HOME/bin); "
                           "a JDK 17+ is required for the Java interoperability tests")
    return found


def _jars() -> list[Path]:
    return sorted(jar_dir().glob("*.jar"))


def compile_java(build_dir: str | os.PathLike = DEFAULT_BUILD_DIR) -> str:
    """javac tests/java/*.java into build_dir; return the runtime classpath.

    Recompiles only when a source (or the set of sources/jars) changed since
    the last successful compile. Cached per build_dir for the session.
    """
    build = Path(build_dir).resolve()
    with _lock:
        if build in _classpaths:
            return _classpaths[build]
    jars = _jars()
    sources = sorted(JAVA_SRC.glob("*.java"))
    if not sources:
        raise RuntimeError(f"no Java sources in {JAVA_SRC}")
    classpath = os.pathsep.join([str(build)] + [str(j) for j in jars])
    compile_cp = os.pathsep.join(str(j) for j in jars)

    with _lock:
        if build in _classpaths:
            return _classpaths[build]
        stamp = build / ".compiled"
        signature = "\n".join([str(s) for s in sources] + [str(j) for j in jars])
        fresh = (
            stamp.is_file()
            and stamp.read_text() == signature
            and all(s.stat().st_mtime <= stamp.stat().st_mtime for s in sources)
        )
        if not fresh:
            build.mkdir(parents=True, exist_ok=True)
            for old in build.glob("*.class"):
                old.unlink()
            stamp.unlink(missing_ok=True)
            cmd = [_tool("javac"), "-nowarn", "-encoding", "UTF-8", "-d", str(build),
                   "-cp", compile_cp, *map(str, sources)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"javac failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
            stamp.write_text(signature)
        _classpaths[build] = classpath
        return classpath


def _parse(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def run_java(main_class: str, *args, timeout: float = 120, check: bool = True,
             build_dir: str | os.PathLike = DEFAULT_BUILD_DIR) -> list[dict]:
    """Run `java -cp <classpath> main_class args...`; return stdout's JSON lines.

    Raises JavaError (with .stdout/.stderr/.lines) on non-zero exit or timeout,
    unless check=False, in which case the parsed lines are returned anyway
    (a failing program prints a {"type":"error",...} line).
    """
    classpath = compile_java(build_dir)
    cmd = [_tool("java"), "-cp", classpath, main_class, *map(str, args)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise JavaError(f"{main_class} timed out after {timeout}s: {' '.join(map(str, args))}\n"
                        f"stdout:\n{out}\nstderr:\n{err}",
                        returncode=None, stdout=out, stderr=err, lines=_parse(out)) from None
    lines = _parse(proc.stdout)
    if proc.returncode != 0 and check:
        raise JavaError(f"{main_class} exited {proc.returncode}: {' '.join(map(str, args))}\n"
                        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}",
                        returncode=proc.returncode, stdout=proc.stdout,
                        stderr=proc.stderr, lines=lines)
    return lines
