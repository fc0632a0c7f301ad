"""`tenure audit` argument handling (no Spark needed) and the package zip shipped to remote executors."""
import os
import subprocess
import sys

import pytest

from tenure.audit.spark_session import package_zip
from tenure.tools.cli import main


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["audit", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["audit", str(tmp_path), "--out", str(tmp_path / "out"), "--since", "yesterday"]) == 2
    assert "--since" in capsys.readouterr().err


def test_without_pyspark_the_hint_says_how_to_install_it_in_a_clone_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyspark", None)                # import pyspark -> ImportError
    monkeypatch.delitem(sys.modules, "tenure.audit.job", raising=False)
    assert main(["audit", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'tenure[audit]'" in err and "pip install -e '.[audit]'" in err and "pyspark" in err


def test_serve_does_not_import_pyspark():
    code = "import sys, tenure.tools.cli; tenure.tools.cli._parser(); print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_package_zip_alone_decodes_records_on_an_executor(tmp_path):
    """What a remote executor gets with addPyFile: tenure (every subpackage, schemas included) from the zip."""
    z = package_zip(str(tmp_path))
    code = f"""
import sys

import pytest
sys.path.insert(0, {z!r})
sys.modules["confluent_kafka"] = None          # executors need no client to fold catch-up checkpoints
from tenure.audit import read, fold
from tenure.protocol import records as rec
assert read.__file__.startswith({z!r}) and rec.__file__.startswith({z!r}), (read.__file__, rec.__file__)
r = rec.StaticMemberEventRecord("g", "i", rec.JOINED, None, "m", 1, 5, "c", "/h")
assert rec.decode(*rec.encode(r)) == r
from tenure.catchup import ranges
from types import SimpleNamespace as Row
assert ranges.__file__.startswith({z!r}), ranges.__file__
md = "tenure.catchup/1 instance=w ranges=70-120:70"
rows = [Row(group="g.catchup", topic="t", partition=0, metadata=m, time=t, log_partition=0, log_offset=t)
        for t, m in ((1, md), (2, md[:-len("70-120:70")]))]
assert list(fold.fold_catchup_ranges(rows)) == [
    ("g.catchup", "t", 0, 70, 120, 1, 2, 2, None, None, None, "w", 2, 0)], list(fold.fold_catchup_ranges(rows))
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "ok", out.stderr


def test_the_cli_audits_a_data_dir(tmp_path):
    """`tenure audit DIR --out OUT --master local[1]` end to end, in its own process (it starts and stops
    its own Spark): exit 0, every table and the report written, the summary on stdout, progress on stderr."""
    from tenure.protocol import records as rec

    from .logs import T0, Writer, ev, gm
    w = Writer(tmp_path / "data", 0)
    w.add(ev("g", "i", rec.JOINED, None, "m1", T0), T0)
    w.add(gm("g", 1, [("m1", "i")], T0 + 1), T0 + 1)
    w.add(rec.OffsetCommitRecord("g", "t", 0, 42, -1, "", T0 + 2), T0 + 2)
    w.close()
    out = tmp_path / "out"
    code = (f"import sys; from tenure.tools.cli import main; "
            f"sys.exit(main(['audit', {str(tmp_path / 'data')!r}, '--out', {str(out)!r}, '--master', 'local[1]']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    for table in ("member_map_history", "generations", "static_events", "offsets_history", "catchup_ranges",
                  "anomalies", "errors"):
        assert (out / table / "_SUCCESS").exists(), table
    assert (out / "report.html").stat().st_size > 0
    summary = dict(line.rsplit(None, 1) for line in p.stdout.splitlines() if line.strip())
    assert (summary["groups"], summary["member ids (intervals)"], summary["generations"],
            summary["static events"], summary["offset commits"], summary["errors"]) == ("1", "1", "1", "1", "1", "0")
    assert "audit: [" in p.stderr and "starting Spark (local[1])" in p.stderr and "done in" in p.stderr
    # nothing but tenure's own progress: no Spark warning about the host's address, no py4j INFO lines
    assert "resolves to a loopback address" not in p.stderr and "py4j" not in p.stderr, p.stderr
    # ... and no other line of Spark's or the JVM's (log4j's banner, NativeCodeLoader, SparkStringUtils, the
    # launcher's incubator-modules WARNING): those went to a file, named, and removed after a good run
    assert [line for line in p.stderr.splitlines() if not line.startswith("audit: [")] == [], p.stderr
    log_line = next(line for line in p.stderr.splitlines() if "Spark's own warnings and errors go to" in line)
    jvm_log = log_line.split(" go to ", 1)[1].split(" (", 1)[0]
    assert jvm_log.endswith("/spark.log") and not os.path.exists(os.path.dirname(jvm_log)), log_line


# ---------------------------------------------------------------------- a cluster master without --python-env
def test_the_executors_environment_is_packed_once_and_cached(tmp_path, monkeypatch):
    from tenure.audit import pack
    built, notes = [], []
    monkeypatch.setattr(pack, "_pack_into", lambda out: built.append(out) or out.write_bytes(b"archive") or out)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = pack.cached(note=notes.append)
    assert first.parent == tmp_path / "cache" / "tenure" and first.read_bytes() == b"archive"
    assert first.name.startswith(f"audit-env-py{sys.version_info[0]}.{sys.version_info[1]}-")
    assert len(built) == 1 and notes == [f"packing the executors' Python environment ({', '.join(pack.requirements())}) "
                                         f"once, into {first}"]
    assert pack.cached(note=notes.append) == first and len(built) == 1 and len(notes) == 1     # cached
    assert [p.name for p in first.parent.iterdir()] == [first.name]                          # no temp file left
    monkeypatch.setattr(pack, "requirements", lambda: ["kafka-python==9.9.9"])               # another set: another
    assert pack.cached() != first and len(built) == 2


def _audit_args(tmp_path, *extra):
    (tmp_path / "data").mkdir(exist_ok=True)
    return ["audit", str(tmp_path / "data"), "--out", str(tmp_path / "out"), "--master", "spark://127.0.0.1:7077",
            *extra]


def test_a_cluster_master_without_python_env_ships_the_cached_one(tmp_path, monkeypatch):
    from tenure.audit import job, pack
    ran = []
    monkeypatch.setattr(job, "run", lambda opts: ran.append(opts) or (0, {}))
    archive = tmp_path / "env.tar.gz"
    monkeypatch.setattr(pack, "cached", lambda note: archive)
    assert main(_audit_args(tmp_path)) == 0
    assert ran[-1].python_env == str(archive) and ran[-1].master == "spark://127.0.0.1:7077"
    monkeypatch.setattr(pack, "cached", lambda note: pytest.fail("--python-env none packs nothing"))
    assert main(_audit_args(tmp_path, "--python-env", "none")) == 0 and ran[-1].python_env is None
    given = tmp_path / "given.tar.gz"
    given.write_bytes(b"x")
    assert main(_audit_args(tmp_path, "--python-env", str(given))) == 0 and ran[-1].python_env == str(given)


def test_when_packing_fails_the_audit_stops_before_spark_with_one_line(tmp_path, monkeypatch, capsys):
    from tenure.audit import job, pack
    monkeypatch.setattr(job, "run", lambda opts: pytest.fail("no job without the executors' environment"))

    def fails(note):
        raise subprocess.CalledProcessError(1, ["pip", "install", "pyarrow"])
    monkeypatch.setattr(pack, "cached", fails)
    assert main(_audit_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("tenure audit: --master spark://127.0.0.1:7077 needs the executors' Python environment "
                          "and packing one failed (CalledProcessError: ") and \
        "run `python -m tenure.audit.pack audit-env.tar.gz` and pass --python-env audit-env.tar.gz" in err, err
