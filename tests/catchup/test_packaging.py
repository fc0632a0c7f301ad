"""tenure.catchup is an optional extra: the server never imports it (nor confluent-kafka)."""
import subprocess
import sys


def test_the_server_and_cli_do_not_import_the_catchup_package():
    code = ("import sys, tenure.tools.cli, tenure.server, tenure.control.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.startswith(('tenure.catchup', 'confluent_kafka'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_package_is_importable_under_its_namespaced_name():
    import tenure.catchup
    assert tenure.catchup.CatchUpConsumer.__module__ == "tenure.catchup.consumer"
