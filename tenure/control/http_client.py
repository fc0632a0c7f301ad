"""The HTTP admin endpoint's client: one call to a running server's endpoint (tenure/control/http_server.py),
as `tenure groups|fault|broker|coordinator ...` make them (tenure/control/commands.py)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from tenure.control.http_server import JSON_TYPE


def request(admin: str, method: str, path: str, data: dict | None = None,
            token: str | None = None) -> tuple[int, object]:
    """One call to the endpoint at `admin` (H:P): (HTTP status, the JSON answer)."""
    headers = {"Content-Type": JSON_TYPE} if method not in ("GET", "HEAD") else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    payload = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(f"http://{admin}{path}", method=method, data=payload, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw or b"null")
    except ValueError:           # not tenure's endpoint answering
        return status, {"error": "NOT_JSON", "code": None,
                        "message": f"HTTP {status}, not JSON: {raw[:120].decode(errors='replace')!r}"}
