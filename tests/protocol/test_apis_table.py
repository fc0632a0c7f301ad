"""The served-API table (protocol/apis.py) names each API's kafka-python classes by module; they are imported the
first time they are used, so what the table once asserted at import is held here: the classes are the API's, and
every served range lies within what their schemas define."""
from __future__ import annotations

import subprocess
import sys

from kafka.protocol.api_key import ApiKey

from tenure.protocol.apis import SUPPORTED, ApiClasses, served_apis
from tenure.protocol.releases import RELEASES


def test_every_served_api_names_its_own_classes_and_stays_within_their_schemas():
    assert len(SUPPORTED) == 62
    for key, spec in SUPPORTED.items():
        assert spec.key == key and ApiKey(key).name == spec.name
        req, resp = spec.request, spec.response
        assert req.API_KEY == key == resp.API_KEY, spec.name
        assert (req.__name__, resp.__name__) == (f"{spec.name}Request", f"{spec.name}Response")
        assert 0 <= spec.min_version <= spec.max_version <= min(req.max_version, resp.max_version), spec.name
        assert spec.flexible(spec.max_version) == req.flexible_version_q(spec.max_version)


def test_a_release_cut_shares_the_classes_of_the_whole_table():
    for name in RELEASES:
        for key, spec in served_apis(name).specs.items():
            assert spec.classes is SUPPORTED[key].classes
            assert spec.request is SUPPORTED[key].request


def test_classes_are_imported_on_first_use_once_even_by_threads_at_once_with_warnings_as_errors():
    code = ("import threading, sys\n"
            "import tenure.server\n"
            "from tenure.protocol.apis import SUPPORTED\n"
            "spec = SUPPORTED[44]     # IncrementalAlterConfigs: kafka.protocol.admin.configs\n"
            "assert spec.classes.pair is None and 'kafka.protocol.admin.configs' not in sys.modules\n"
            "got = []\n"
            "ts = [threading.Thread(target=lambda: got.append(spec.request)) for _ in range(16)]\n"
            "[t.start() for t in ts]\n"
            "[t.join() for t in ts]\n"
            "assert len(got) == 16 and len(set(got)) == 1 and got[0].__name__ == 'IncrementalAlterConfigsRequest'\n"
            "assert spec.classes.pair == (got[0], spec.response)\n"
            "share = SUPPORTED[78]     # ShareFetch: tenure's own schema\n"
            "assert share.request.__module__ == 'tenure.protocol.share_group'\n"
            "from kafka.protocol.admin import CreateTopicsRequest   # the whole package, as it always was\n"
            "assert CreateTopicsRequest is SUPPORTED[19].request\n")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_an_api_whose_module_lacks_its_classes_fails_loudly():
    missing = ApiClasses("NoSuchApi", "admin.groups")
    try:
        missing.get()
    except AttributeError as exc:
        assert "NoSuchApiRequest" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
    assert missing.pair is None
