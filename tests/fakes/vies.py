"""A fake of the VIES REST API on loopback (a plugin of tests/conftest.py: the
``fake_vies`` fixture).

``FakeVies`` serves ``POST /check-vat-number`` as the Commission's service does: a JSON
``{"countryCode", "vatNumber"}`` in, ``{"countryCode", "vatNumber", "requestDate",
"valid", "requestIdentifier", "name", "address", "userError"}`` out. A number is valid when
it is in ``registered`` (prefix + number, e.g. "DE136695976" -> (name, address)); any
other is answered ``valid: false``. Knobs for bad days:

- ``outage = "MS_UNAVAILABLE"`` (or TIMEOUT, MS_MAX_CONCURRENT_REQ...): answer 200 with
  that ``userError`` and ``valid: false``, as VIES does when a member state's system is
  down; ``outage = 503``: answer that status with VIES's ``errorWrappers`` body;
- ``delay = N``: wait N seconds before answering.

``requests`` lists the JSON bodies received. Written apart from production code on
purpose: a fake sharing our client's parsing would share its bugs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class FakeVies:
    def __init__(self):
        self.registered: dict[str, tuple[str, str]] = {}
        self.outage: str | int | None = None
        self.delay = 0.0
        self.requests: list[dict] = []
        self._server: ThreadingHTTPServer | None = None

    def register(self, vat_id: str, name: str = "---", address: str = "---") -> None:
        self.registered[vat_id] = (name, address)

    def answer(self, body: dict) -> tuple[int, dict]:
        self.requests.append(body)
        country, number = body.get("countryCode"), body.get("vatNumber")
        if not isinstance(country, str) or not isinstance(number, str):
            return 400, {
                "actionSucceed": False,
                "errorWrappers": [{"error": "INVALID_INPUT", "message": "bad request"}],
            }
        if isinstance(self.outage, int):
            return self.outage, {
                "actionSucceed": False,
                "errorWrappers": [{"error": "SERVICE_UNAVAILABLE", "message": "try later"}],
            }
        answer = {
            "countryCode": country,
            "vatNumber": number,
            "requestDate": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "valid": False,
            "requestIdentifier": "",
            "name": "---",
            "address": "---",
            "userError": "INVALID",
        }
        if self.outage:
            answer["userError"] = self.outage
            return 200, answer
        found = self.registered.get(country + number)
        if found is not None:
            answer.update(
                valid=True,
                name=found[0],
                address=found[1],
                userError="VALID",
                requestIdentifier="WAPI" + uuid.uuid4().hex[:12].upper(),
            )
        return 200, answer

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if fake.delay:
                    time.sleep(fake.delay)
                if self.path.rstrip("/") != "/check-vat-number":
                    status, body = 404, {"actionSucceed": False, "errorWrappers": []}
                else:
                    try:
                        parsed = json.loads(raw)
                    except ValueError:
                        parsed = {}
                    status, body = fake.answer(parsed if isinstance(parsed, dict) else {})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                # The client may have given up waiting (a timeout test).
                with contextlib.suppress(OSError):
                    self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture
def fake_vies():
    fake = FakeVies()
    fake.start()
    yield fake
    fake.stop()
