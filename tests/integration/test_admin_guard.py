"""The admin endpoint under hostile and careless calls: every state-changing call needs JSON content, its
own loopback Host and no foreign Origin (CSRF, DNS rebinding), an optional bearer token; every bad value
is a 400 with a one-line reason; and after each of these calls a real client's commit still works (no
admin call can leave the coordinator unable to write)."""
from __future__ import annotations

import http.client
import json
import re

import pytest
from confluent_kafka import Consumer, TopicPartition

from tenure.config import ServerConfig
from tenure.coordinator.clock import CLOCK_MAX_MS
from tenure.server import ServerThread
from tenure.tools.cli import main

pytestmark = pytest.mark.timeout(120)

JSON = {"Content-Type": "application/json"}


def call(port: int, method: str, path: str, body: bytes | str | dict | None = None,
         headers: dict | None = None, host: str | None = None) -> tuple[int, dict | list | str]:
    """One raw HTTP request (headers exactly as given; `host` replaces the Host header)."""
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", f"127.0.0.1:{port}" if host is None else host)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw.decode(errors="replace")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def served():
    """One server with its admin endpoint and one real consumer that commits after every hostile call."""
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        s.call(lambda: s.server.topics.create("guard-t", 1))
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "guard-g", "enable.auto.commit": False})
        s.committed = 0

        def commit_works():
            s.committed += 1
            c.commit(offsets=[TopicPartition("guard-t", 0, s.committed)], asynchronous=False)
            got = c.committed([TopicPartition("guard-t", 0)], timeout=10)
            assert got[0].offset == s.committed
        s.commit_works = commit_works
        try:
            yield s
        finally:
            c.close()


def state(s) -> tuple:
    """What a refused call must not have changed: the clock offset, the fault rules, the brokers' delays."""
    return s.call(lambda: (s.server.runtime.clock_offset_ms, [r.to_dict() for r in s.server.faults.rules()],
                           [b.slow_ms for b in s.server.cluster.brokers.values()]))


LARGE = str(2 ** 63)
NESTED = '{"ms": ' + "[" * 20000 + "]" * 20000 + "}"
FAIL = '{"action": "fail", "api": "JoinGroup", "error": 15, %s}'

# (id, method, path, body, headers, host, status, words the one-line reason must contain)
HOSTILE = [
    ("ms-1e300", "POST", "/clock/advance", '{"ms": 1e300}', JSON, None, 400, "ms"),
    ("ms-Infinity", "POST", "/clock/advance", '{"ms": Infinity}', JSON, None, 400, "Infinity"),
    ("ms-minus-Infinity", "POST", "/clock/advance", '{"ms": -Infinity}', JSON, None, 400, "Infinity"),
    ("ms-NaN", "POST", "/clock/advance", '{"ms": NaN}', JSON, None, 400, "NaN"),
    ("ms-1e400", "POST", "/clock/advance", '{"ms": 1e400}', JSON, None, 400, "1e400"),
    ("ms-2^63", "POST", "/clock/advance", f'{{"ms": {LARGE}}}', JSON, None, 400, "ms"),
    ("ms-past-year-9999", "POST", "/clock/advance", f'{{"ms": {CLOCK_MAX_MS}}}', JSON, None, 400, "ms"),
    ("ms-negative", "POST", "/clock/advance", '{"ms": -5}', JSON, None, 400, "ms"),
    ("ms-fraction", "POST", "/clock/advance", '{"ms": 1.5}', JSON, None, 400, "ms"),
    ("ms-true", "POST", "/clock/advance", '{"ms": true}', JSON, None, 400, "ms"),
    ("ms-string", "POST", "/clock/advance", '{"ms": "100"}', JSON, None, 400, "ms"),
    ("ms-null", "POST", "/clock/advance", '{"ms": null}', JSON, None, 400, "ms"),
    ("ms-missing", "POST", "/clock/advance", '{}', JSON, None, 400, "ms"),
    ("ms-unknown-field", "POST", "/clock/advance", '{"ms": 10, "mss": 1}', JSON, None, 400, "mss"),
    ("deeply-nested", "POST", "/clock/advance", NESTED, JSON, None, 400, "nested"),
    ("huge-digits", "POST", "/clock/advance", '{"ms": %s}' % ("9" * 5000), JSON, None, 400, "JSON"),
    ("not-json", "POST", "/faults", "{not json", JSON, None, 400, "JSON"),
    ("not-utf8", "POST", "/faults", b'{"api": "\xff"}', JSON, None, 400, "UTF-8"),
    ("not-an-object", "POST", "/faults", "[1, 2]", JSON, None, 400, "object"),
    ("too-large", "POST", "/faults", '{"api": "%s"}' % ("x" * 200000), JSON, None, 413, "bytes"),
    ("count-fraction", "POST", "/faults", FAIL % '"count": 1.5', JSON, None, 400, "count"),
    ("count-true", "POST", "/faults", FAIL % '"count": true', JSON, None, 400, "count"),
    ("count-zero", "POST", "/faults", FAIL % '"count": 0', JSON, None, 400, "count"),
    ("count-negative", "POST", "/faults", FAIL % '"count": -3', JSON, None, 400, "count"),
    ("count-1e300", "POST", "/faults", FAIL % '"count": 1e300', JSON, None, 400, "count"),
    ("count-string", "POST", "/faults", FAIL % '"count": "2"', JSON, None, 400, "count"),
    ("count-huge", "POST", "/faults", FAIL % (f'"count": {LARGE}'), JSON, None, 400, "count"),
    ("fault-unknown-field", "POST", "/faults", FAIL % '"forever": true', JSON, None, 400, "forever"),
    ("api-true", "POST", "/faults", '{"action": "close", "api": true}', JSON, None, 400, "api"),
    ("api-list", "POST", "/faults", '{"action": "close", "api": ["Fetch"]}', JSON, None, 400, "api"),
    ("error-true", "POST", "/faults", '{"action": "fail", "api": "Fetch", "error": true}', JSON, None, 400,
     "error"),
    ("error-fraction", "POST", "/faults", '{"action": "fail", "api": "Fetch", "error": 15.0}', JSON, None,
     400, "error"),
    ("error-out-of-int16", "POST", "/faults", '{"action": "fail", "api": "Fetch", "error": 40000}', JSON,
     None, 400, "error"),
    ("action-unknown", "POST", "/faults", '{"action": "explode", "api": "Fetch"}', JSON, None, 400, "action"),
    ("action-missing", "POST", "/faults", '{"api": "Fetch"}', JSON, None, 400, "action"),
    ("delay-1e300", "POST", "/faults", '{"action": "delay", "api": "Fetch", "ms": 1e300}', JSON, None, 400,
     "ms"),
    ("delay-huge", "POST", "/faults", f'{{"action": "delay", "api": "Fetch", "ms": {LARGE}}}', JSON, None,
     400, "ms"),
    ("delay-negative", "POST", "/faults", '{"action": "delay", "api": "Fetch", "ms": -1}', JSON, None, 400,
     "ms"),
    ("delay-on-fail", "POST", "/faults", FAIL % '"ms": 5', JSON, None, 400, "ms"),
    ("clear-unknown-parameter", "DELETE", "/faults?apis=Fetch", None, JSON, None, 400, "apis"),
    ("clear-with-body-field", "DELETE", "/faults", '{"api": "Fetch"}', JSON, None, 400, "api"),
    ("force-with-body-field", "POST", "/groups/guard-g/force-rebalance", '{"now": 1}', JSON, None, 400, "now"),
    # not JSON content: a browser form or a text/plain fetch() needs no CORS preflight - refused
    ("text-plain", "POST", "/clock/advance", '{"ms": 1}', {"Content-Type": "text/plain"}, None, 415,
     "application/json"),
    ("form", "POST", "/faults", "action=close&api=Fetch", {"Content-Type": "application/x-www-form-urlencoded"},
     None, 415, "application/json"),
    ("no-content-type", "POST", "/restart", "", {}, None, 415, "application/json"),
    ("json-lookalike", "POST", "/restart", "{}", {"Content-Type": "application/jsonx"}, None, 415,
     "application/json"),
    # CSRF: a page elsewhere posting to the endpoint
    ("foreign-origin", "POST", "/clock/advance", '{"ms": 1}', {**JSON, "Origin": "http://evil.example"}, None,
     403, "Origin"),
    ("null-origin", "POST", "/restart", "{}", {**JSON, "Origin": "null"}, None, 403, "Origin"),
    ("other-local-port-origin", "DELETE", "/faults", None, {**JSON, "Origin": "http://127.0.0.1:1"}, None, 403,
     "Origin"),
    ("foreign-referer", "POST", "/restart", "{}", {**JSON, "Referer": "http://evil.example/page"}, None, 403,
     "Referer"),
    ("cross-site-fetch", "POST", "/restart", "{}", {**JSON, "Sec-Fetch-Site": "cross-site"}, None, 403,
     "Sec-Fetch-Site"),
    # DNS rebinding: the browser sends the attacker's name as Host
    ("foreign-host", "POST", "/clock/advance", '{"ms": 1}', JSON, "evil.example", 403, "Host"),
    ("foreign-host-port", "POST", "/restart", "{}", JSON, "rebind.evil.example:9644", 403, "Host"),
    ("localhost-lookalike", "POST", "/faults", FAIL % '"count": 1', JSON, "localhost.evil.example", 403, "Host"),
    ("empty-host", "POST", "/faults", FAIL % '"count": 1', JSON, "", 403, "Host"),
    # ... and reads: a rebinding page must not read groups (member ids, client hosts), metrics or brokers
    ("foreign-host-get-groups", "GET", "/groups", None, {}, "evil.example", 403, "Host"),
    ("foreign-host-get-group", "GET", "/groups/guard-g", None, {}, "rebind.evil.example:9644", 403, "Host"),
    ("foreign-host-get-metrics", "GET", "/metrics", None, {}, "evil.example", 403, "Host"),
    ("foreign-host-get-brokers", "GET", "/brokers", None, {}, "evil.example", 403, "Host"),
    ("foreign-host-get-faults", "GET", "/faults", None, {}, "localhost.evil.example", 403, "Host"),
    ("foreign-host-get-index", "GET", "/", None, {}, "evil.example", 403, "Host"),
    ("foreign-host-get-health", "GET", "/health", None, {}, "evil.example", 403, "Host"),
    ("empty-host-get", "GET", "/groups", None, {}, "", 403, "Host"),
    ("unbalanced-host-get", "GET", "/groups", None, {}, "[::1", 403, "Host"),
    # a broker's added delay is bounded as a delay rule is (10^18 ms would stop it answering; 10^400 overflow)
    ("slow-10^18", "POST", "/brokers/0/slow", '{"delay_ms": 1000000000000000000}', JSON, None, 400, "delay_ms"),
    ("slow-10^400", "POST", "/brokers/0/slow", '{"delay_ms": 1%s}' % ("0" * 400), JSON, None, 400, "delay_ms"),
    ("slow-2^31", "POST", "/brokers/0/slow", f'{{"delay_ms": {2 ** 31}}}', JSON, None, 400, "2147483647"),
    ("slow-negative", "POST", "/brokers/0/slow", '{"delay_ms": -1}', JSON, None, 400, "delay_ms"),
    ("unknown-endpoint", "POST", "/clock/rewind", '{"ms": 1}', JSON, None, 404, "GET /"),
    ("wrong-method", "PUT", "/faults", "{}", JSON, None, 405, "PUT"),
]


@pytest.mark.parametrize("method,path,body,headers,host,status,words", [h[1:] for h in HOSTILE],
                         ids=[h[0] for h in HOSTILE])
def test_hostile_call_is_refused_with_one_line_and_commits_still_work(served, method, path, body, headers, host,
                                                                       status, words):
    before = state(served)
    got, answer = call(served.admin_port, method, path, body, headers, host)
    assert got == status, answer
    assert isinstance(answer, dict) and set(answer) == {"error", "code", "message"}, answer
    message = answer["message"]
    assert words in message and "\n" not in message and "Traceback" not in message, message
    assert len(message) < 400, message
    assert state(served) == before, "a refused call changed nothing"
    served.commit_works()


def test_a_foreign_host_is_refused_before_the_route_and_reads_by_name_or_address_still_work(served):
    port = served.admin_port
    assert call(port, "HEAD", "/groups", host="evil.example") == (403, "")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost", "127.0.0.1"):
        status, groups = call(port, "GET", "/groups", host=host)
        assert status == 200 and isinstance(groups, list), (host, groups)
    served.commit_works()


def test_a_broker_delay_is_bounded_in_process_too_and_the_broker_still_answers(served):
    from tenure.control.faults import MAX_DELAY_MS
    for bad in (10 ** 18, 10 ** 400, MAX_DELAY_MS + 1, -1):
        with pytest.raises(ValueError, match="delay_ms"):
            served.set_broker_slow(0, bad)
    assert served.call(lambda: served.server.cluster.brokers[0].slow_ms) == 0
    status, state_ = call(served.admin_port, "POST", "/brokers/0/slow", {"delay_ms": 1}, JSON)
    assert status == 200, state_
    served.commit_works()                                   # answered, 1 ms later
    assert call(served.admin_port, "POST", "/brokers/0/slow", {"delay_ms": 0}, JSON)[0] == 200


def test_the_same_calls_done_right_are_accepted(served):
    """The guard refuses only what it should: JSON with a charset, the loopback names, a same-origin page."""
    before = served.call(lambda: served.server.runtime.clock_offset_ms)
    port = served.admin_port
    ok = {"Content-Type": "application/json; charset=utf-8"}
    assert call(port, "POST", "/clock/advance", {"ms": 5}, ok)[0] == 200
    assert call(port, "POST", "/clock/advance", {"ms": 5}, JSON, host=f"localhost:{port}")[0] == 200
    assert call(port, "POST", "/clock/advance", {"ms": 5}, JSON, host=f"[::1]:{port}")[0] == 200
    assert call(port, "POST", "/clock/advance", {"ms": 5},
                {**JSON, "Origin": f"http://127.0.0.1:{port}", "Referer": f"http://127.0.0.1:{port}/"})[0] == 200
    assert served.call(lambda: served.server.runtime.clock_offset_ms) == before + 20
    status, rule = call(port, "POST", "/faults", {"action": "delay", "api": "Heartbeat", "ms": 1, "count": None},
                        JSON)
    assert status == 201 and rule["remaining"] is None, rule
    assert call(port, "DELETE", "/faults?api=Heartbeat", None, JSON)[1] == {"removed": 1}
    assert call(port, "POST", "/groups/nope/force-rebalance", None, JSON)[0] == 404
    # reading needs none of that (a browser cannot read the answer cross-origin anyway)
    assert call(port, "GET", "/groups", headers={"Origin": "http://evil.example"})[0] == 200
    served.commit_works()


def test_the_clock_stops_at_the_end_of_year_9999_and_the_coordinator_still_writes():
    """The furthest advance allowed leaves every timestamp a valid date (far inside Kafka's int64 ms); a
    commit is written and read back after it, and one more millisecond is refused."""
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        s.call(lambda: s.server.topics.create("edge-t", 1))
        room = CLOCK_MAX_MS - s.call(s.server.runtime.clock_ms) - 60_000
        status, answer = call(s.admin_port, "POST", "/clock/advance", {"ms": room}, JSON)
        assert status == 200 and answer["advanced_ms"] == room, answer
        status, answer = call(s.admin_port, "POST", "/clock/advance", {"ms": 120_000}, JSON)
        assert status == 400 and "9999-12-31" in answer["message"], answer
        with pytest.raises(ValueError, match="9999-12-31"):
            s.advance_clock(120_000)                    # the in-process twin has the same bound
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "edge-g", "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition("edge-t", 0, 7)], asynchronous=False)
            assert c.committed([TopicPartition("edge-t", 0)], timeout=10)[0].offset == 7
        finally:
            c.close()
        assert s.group("edge-g").offsets[0].offset == 7


def test_too_many_fault_rules_are_refused():
    """Rules are bounded (memory, and the per-request check); the error says how to make room."""
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        from tenure.control.faults import MAX_RULES
        for _ in range(MAX_RULES):
            s.faults.delay("Heartbeat", 0, count=1)
        status, answer = call(s.admin_port, "POST", "/faults", {"action": "close", "api": "Fetch"}, JSON)
        assert status == 409 and str(MAX_RULES) in answer["message"] and "DELETE /faults" in answer["message"]
        assert len(s.faults.rules()) == MAX_RULES


# ---------------------------------------------------------------------- malformed HTTP
MALFORMED = {
    "8KiB-path": b"GET /" + b"a" * 8200 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "chunked-junk": b"POST /faults HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\nzz\r\njunk\r\n",
    "negative-length": b"POST /faults HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\n\r\n",
    "bad-header-byte": b"GET /groups HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer s3cret-t0ken\x01x\r\n\r\n",
    "header-without-colon": b"GET / HTTP/1.1\r\nHost: localhost\r\nno-colon-s3cret-t0ken\r\n\r\n",
}


def raw_status(port: int, data: bytes, then: bytes = b"") -> bytes:
    """The status line answered to `data` (and `then`, sent a moment later: a body that breaks once the
    request is being served)."""
    import socket
    import time
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(data)
        if then:
            time.sleep(0.05)
            c.sendall(then)
        out = b""
        while b"\r\n" not in out:
            chunk = c.recv(4096)
            if not chunk:
                break
            out += chunk
    return out.split(b"\r\n", 1)[0]


def test_malformed_http_is_answered_400_and_logged_in_few_lines_without_tracebacks_or_header_values(caplog,
                                                                                                     monkeypatch):
    """300 malformed requests: each answered 400; the log has at most --log-burst lines of them per window and
    a count of the rest, none with a traceback and none quoting the bytes sent (a token in a bad header)."""
    import logging
    import time
    caplog.set_level(logging.DEBUG)
    with ServerThread(ServerConfig(port=0, admin_port=0, log_window_ms=600, log_burst=3)) as s:
        s.call(lambda: s.server.topics.create("bad-http-t", 1))
        t0 = time.monotonic()
        statuses = [raw_status(s.admin_port, data) for _ in range(60) for data in MALFORMED.values()]
        took = time.monotonic() - t0
        assert len(statuses) == 300 and set(statuses) == {b"HTTP/1.0 400 Bad Request"}, set(statuses)
        import socket
        for name, data in MALFORMED.items():           # the answer names the kind of error, never the bytes sent
            with socket.create_connection(("127.0.0.1", s.admin_port), timeout=10) as c:
                c.sendall(data)
                answer = b""
                while chunk := c.recv(65536):
                    answer += chunk
            body = answer.split(b"\r\n\r\n", 1)[1]
            assert re.fullmatch(rb"malformed HTTP request \((LineTooLong|BadHttpMessage)\)", body), (name, body)
        # a chunk that breaks once the request is being served: aiohttp waits for the rest of the body (no error,
        # no end); the endpoint's bound on a body's arrival answers it (408 here in 0.5 s; 10 s by default)
        from tenure.control import http_server
        monkeypatch.setattr(http_server, "BODY_TIMEOUT_S", 0.5)
        late = raw_status(s.admin_port, b"POST /faults HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                                        b"\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}", then=b"\r\nzz\r\njunk\r\n")
        assert late == b"HTTP/1.1 408 Request Timeout", late
        import socket
        with socket.create_connection(("127.0.0.1", s.admin_port), timeout=10) as gone:    # leaves mid-body
            gone.sendall(b"POST /faults HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"action\"")
            time.sleep(0.2)
        time.sleep(0.8)                                     # the window ends: one line counts the rest
        assert call(s.admin_port, "GET", "/health")[0] == 200
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "bad-http-g", "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition("bad-http-t", 0, 3)], asynchronous=False)
        finally:
            c.close()
    records = [r for r in caplog.records if r.name.startswith(("tenure.admin", "aiohttp"))]
    text = "\n".join(r.getMessage() for r in records)
    assert all(r.exc_info is None for r in records), "no traceback"
    assert "s3cret" not in text and "aaaa" not in text and "-5" not in text, text
    malformed = [r for r in records if r.getMessage().startswith("admin endpoint: malformed HTTP request from")]
    windows = took / 0.6 + 2
    assert 3 <= len(malformed) <= 3 * windows, (len(malformed), took)
    assert all(r.levelno == logging.WARNING for r in malformed)
    assert {r.getMessage().rsplit("(", 1)[1] for r in malformed} <= {"LineTooLong)", "BadHttpMessage)"}
    assert any("more line(s) like the above suppressed" in r.getMessage() for r in records), text
    assert "admin endpoint: the connection from 127.0.0.1 closed before its POST was answered" in text, text
    assert len(records) <= 4 * windows, len(records)


# ---------------------------------------------------------------------- the bearer token
@pytest.fixture
def guarded():
    with ServerThread(ServerConfig(port=0, admin_port=0, admin_token="s3cret")) as s:
        yield s


def test_token_is_required_for_every_endpoint_but_health_and_the_index(guarded, monkeypatch, capsys):
    port = guarded.admin_port
    for method, path, body in (("GET", "/groups", None), ("GET", "/metrics", None), ("GET", "/faults", None),
                               ("POST", "/clock/advance", {"ms": 1}), ("POST", "/restart", {})):
        status, answer = call(port, method, path, body, JSON)
        assert status == 401 and "token" in answer["message"], (path, answer)
        status, _ = call(port, method, path, body, {**JSON, "Authorization": "Bearer wrong"})
        assert status == 401, path
        status, _ = call(port, method, path, body, {**JSON, "Authorization": "Basic czNjcmV0"})
        assert status == 401, path
    assert guarded.call(lambda: guarded.server.runtime.clock_offset_ms) == 0
    assert not guarded.server.restart_requested.is_set()
    assert call(port, "GET", "/health")[0] == 200
    assert call(port, "GET", "/")[0] == 200
    assert call(port, "GET", "/groups", headers={"Authorization": "Bearer s3cret"})[0] == 200
    assert call(port, "POST", "/clock/advance", {"ms": 1}, {**JSON, "Authorization": "Bearer s3cret"})[0] == 200

    admin = f"127.0.0.1:{port}"
    monkeypatch.delenv("TENURE_ADMIN_TOKEN", raising=False)
    assert main(["groups", "--admin", admin, "list"]) == 1
    assert "token" in capsys.readouterr().err
    assert main(["groups", "list", "--admin", admin, "--admin-token", "s3cret"]) == 0
    monkeypatch.setenv("TENURE_ADMIN_TOKEN", "s3cret")
    assert main(["fault", "--admin", admin, "list"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_an_empty_token_is_refused_not_taken_for_none(monkeypatch):
    monkeypatch.delenv("TENURE_ADMIN_TOKEN", raising=False)
    for empty in ("", "  "):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--port", "0", "--admin-token", empty])
        assert str(exc.value) == "tenure: --admin-token is empty: give a token, or leave it out for none (then " \
                                 "any local process may call the admin endpoint)"
        with pytest.raises(ValueError, match="--admin-token is empty"):
            ServerConfig(admin_token=empty)
    from tenure.tools.cli import _config, _parser
    monkeypatch.setenv("TENURE_ADMIN_TOKEN", "")              # an empty variable is an unset one (compose's ${X:-})
    assert _config(_parser().parse_args(["serve"])).admin_token is None
    monkeypatch.setenv("TENURE_ADMIN_TOKEN", "from-env")
    assert _config(_parser().parse_args(["serve"])).admin_token == "from-env"
    assert _config(_parser().parse_args(["serve", "--admin-token", "flag"])).admin_token == "flag"


# ---------------------------------------------------------------------- another machine, no token: read-only
OTHER_MACHINE = r"""
import json, logging, sys, urllib.request
from tenure.config import ServerConfig
from tenure.server import ServerThread

records = []
logging.getLogger().addHandler(type("H", (logging.Handler,), {"emit": lambda self, r: records.append(r)})())
logging.getLogger().setLevel(logging.INFO)

def call(port, method, path, source, host=None, token=None, body=None):
    import http.client
    conn = http.client.HTTPConnection("10.9.0.1" if source != "127.0.0.1" else "127.0.0.1", port, timeout=10,
                                      source_address=(source, 0))
    headers = {"Host": host or f"{source}:{port}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"null")

out = {}
for token in (None, "t0ken"):
    cfg = ServerConfig(port=0, admin_port=0, admin_host="0.0.0.0", advertised_host="tenure-svc", admin_token=token)
    with ServerThread(cfg) as s:
        p = s.admin_port
        out[str(token)] = {
            "read_by_address": call(p, "GET", "/groups", "10.9.0.1", token=token)[0],
            "read_by_advertised_name": call(p, "GET", "/groups", "10.9.0.1", host=f"tenure-svc:{p}", token=token)[0],
            "read_by_other_name": call(p, "GET", "/groups", "10.9.0.1", host=f"evil.example:{p}", token=token)[0],
            "change_from_other_machine": call(p, "POST", "/clock/advance", "10.9.0.1", token=token, body={"ms": 1}),
            "change_from_this_machine": call(p, "POST", "/clock/advance", "127.0.0.1", token=token, body={"ms": 1})[0],
            "clock_offset": s.call(lambda: s.server.runtime.clock_offset_ms),
        }
out["warnings"] = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
out["admin_lines"] = [r.getMessage() for r in records if r.getMessage().startswith("admin endpoint on")]
print(json.dumps(out))
"""


def test_without_a_token_other_machines_may_read_not_change_and_nothing_warns():
    """An endpoint bound to 0.0.0.0 (a container whose port is published) with no token: another address may
    read it (by an address or the --advertised-host name, as a Prometheus on the compose network would) but
    not change the server, and start-up logs no warning. Run in a network namespace of its own, where
    10.9.0.1 is one more address of its loopback device: a peer that is not a loopback address."""
    import shutil
    import subprocess
    import sys
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-rn", "ip", "addr", "add", "10.9.0.1/32", "dev", "lo"],
                                     capture_output=True).returncode != 0:
        pytest.skip("needs unshare -rn and ip (a network namespace of its own)")
    out = subprocess.run([unshare, "-rn", "sh", "-c", 'ip link set lo up && ip addr add 10.9.0.1/32 dev lo && '
                          'exec "$@"', "sh", sys.executable, "-c", OTHER_MACHINE],
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.splitlines()[-1])
    none, tok = got["None"], got["t0ken"]
    assert (none["read_by_address"], none["read_by_advertised_name"], none["read_by_other_name"]) == (200, 200, 403)
    status, answer = none["change_from_other_machine"]
    assert status == 403 and "from another machine (10.9.0.1) needs a token" in answer["message"], answer
    assert none["change_from_this_machine"] == 200 and none["clock_offset"] == 1
    assert tok["change_from_other_machine"][0] == 200 and tok["clock_offset"] == 2      # a token: anyone with it
    assert (tok["read_by_address"], tok["read_by_other_name"]) == (200, 403)
    assert got["warnings"] == []
    assert any("read-only for them without a token; no token" in line for line in got["admin_lines"]), got


# ---------------------------------------------------------------------- where it listens, what it lists
def test_admin_endpoint_binds_loopback_whatever_host_is():
    with ServerThread(ServerConfig(host="0.0.0.0", port=0, admin_port=0)) as s:
        assert s.call(lambda: s.server.kafka_sockets()) == [("0.0.0.0", s.port)]
        assert s.call(lambda: s.server.admin_sockets()) == [("127.0.0.1", s.admin_port)]
        assert s.server.admin_address == f"127.0.0.1:{s.admin_port}"
    with ServerThread(ServerConfig(port=0, admin_port=0, admin_host="0.0.0.0")) as s:   # asked for
        assert s.call(lambda: s.server.admin_sockets()) == [("0.0.0.0", s.admin_port)]
        assert s.server.admin_address == f"127.0.0.1:{s.admin_port}"


def test_index_lists_every_endpoint():
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        status, index = call(s.admin_port, "GET", "/")
        assert status == 200
        listed = {(e["method"], e["path"]) for e in index["endpoints"]}
        routes = s.call(lambda: {(r.method, r.resource.canonical) for r in s.server._admin.app.router.routes()
                                 if r.method != "HEAD"})
        assert listed == routes and ("GET", "/") in listed and ("POST", "/clock/advance") in listed
        assert all(e["description"] for e in index["endpoints"])
        assert index["state_changing"]["content_type"] == "application/json"
