"""`tenure audit` argument handling (no Spark needed) and the package zip shipped to remote executors."""
import subprocess
import sys

from tenure.audit.job import package_zip
from tenure.cli import main


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["audit", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["audit", str(tmp_path), "--out", str(tmp_path / "out"), "--since", "yesterday"]) == 2
    assert "--since" in capsys.readouterr().err


def test_serve_does_not_import_pyspark():
    code = "import sys, tenure.cli; tenure.cli._parser(); print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_package_zip_alone_decodes_records_on_an_executor(tmp_path):
    """What a remote executor gets with addPyFile: tenure (every subpackage, schemas included) from the zip."""
    z = package_zip(str(tmp_path))
    code = f"""
import sys
sys.path.insert(0, {z!r})
from tenure.audit import read, fold
from tenure.protocol import records as rec
assert read.__file__.startswith({z!r}) and rec.__file__.startswith({z!r}), (read.__file__, rec.__file__)
r = rec.StaticMemberEventRecord("g", "i", rec.JOINED, None, "m", 1, 5, "c", "/h")
assert rec.decode(*rec.encode(r)) == r
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "ok", out.stderr
