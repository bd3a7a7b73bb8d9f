"""A real SMTP server on loopback (aiosmtpd) that keeps what it receives.

The ``smtp_server`` fixture (a plugin of tests/conftest.py) is a
:class:`FakeSmtpServer` with ``host``/``port``, the ``messages`` it accepted (parsed,
with their Message-ID).

``raw_messages`` are the same messages as the bytes that arrived. Knobs for bad days:

- ``answer(451)`` / ``answer(421)``: answer DATA with that temporary error until
  ``answer(None)``; ``refuse_recipients(550)`` answers RCPT TO with it;
- ``delay = N``: wait N seconds before accepting each message (a message whose client
  goes away during the wait is not accepted, as with a real server);
- ``down()`` / ``up()``: stop listening (connections are refused) and come back on the
  same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import socket
import threading
import time
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller

TEMPORARY_REPLIES = {
    421: "421 4.3.2 Service not available, closing transmission channel",
    451: "451 4.3.0 Requested action aborted: local error in processing",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Mailbox:
    """The aiosmtpd handler: its hooks run on the server's event loop thread."""

    def __init__(self):
        self.messages: list[EmailMessage] = []
        self.raw: list[bytes] = []  # the bytes of each accepted message, as received
        self.envelopes: list[tuple[str, list[str]]] = []
        self.data_started = 0  # DATA commands begun, accepted or not
        self.reply: str | None = None
        self.recipient_reply: str | None = None
        self.delay = 0.0
        self.changed = threading.Condition()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802
        if self.recipient_reply:
            return self.recipient_reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802
        with self.changed:
            self.data_started += 1
            self.changed.notify_all()
        if self.delay:
            # Cancelled when the client goes away meanwhile: the message is not kept.
            await asyncio.sleep(self.delay)
        if self.reply:
            return self.reply
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.changed:
            self.messages.append(message)
            self.raw.append(envelope.content)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            self.changed.notify_all()
        return "250 2.0.0 OK: queued"


class FakeSmtpServer:
    def __init__(self, host: str = "127.0.0.1"):
        self.host, self.port = host, free_port()
        self.mailbox = Mailbox()
        self._controller: Controller | None = None

    # --- what arrived -------------------------------------------------------------------

    @property
    def messages(self) -> list[EmailMessage]:
        with self.mailbox.changed:
            return list(self.mailbox.messages)

    @property
    def raw_messages(self) -> list[bytes]:
        with self.mailbox.changed:
            return list(self.mailbox.raw)

    @property
    def message_ids(self) -> list[str]:
        return [str(m["Message-ID"]) for m in self.messages]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[EmailMessage]:
        """Wait until at least ``count`` messages were accepted; they are returned."""
        deadline = time.monotonic() + timeout
        with self.mailbox.changed:
            while len(self.mailbox.messages) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{len(self.mailbox.messages)} of {count} messages arrived"
                    )
                self.mailbox.changed.wait(left)
            return list(self.mailbox.messages)

    def wait_for_data(self, count: int, timeout: float = 10.0) -> None:
        """Wait until ``count`` DATA commands have begun (a message is in flight)."""
        deadline = time.monotonic() + timeout
        with self.mailbox.changed:
            while self.mailbox.data_started < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"only {self.mailbox.data_started} DATA commands")
                self.mailbox.changed.wait(left)

    # --- knobs --------------------------------------------------------------------------

    def answer(self, code: int | None) -> None:
        """Answer DATA with ``code`` (421 or 451) from now on; None: accept again."""
        self.mailbox.reply = TEMPORARY_REPLIES[code] if code else None

    def refuse_recipients(self, code: int | None) -> None:
        self.mailbox.recipient_reply = f"{code} 5.1.1 No such user here" if code else None

    @property
    def delay(self) -> float:
        return self.mailbox.delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self.mailbox.delay = seconds

    def up(self) -> None:
        if self._controller is None:
            self._controller = Controller(self.mailbox, hostname=self.host, port=self.port)
            self._controller.start()

    def down(self) -> None:
        controller, self._controller = self._controller, None
        if controller is not None:
            with contextlib.suppress(Exception):
                controller.stop()

    def settings(self) -> dict:
        """App settings that deliver here."""
        return {
            "cmsshop.mail.backend": "smtp",
            "cmsshop.mail.smtp_host": self.host,
            "cmsshop.mail.smtp_port": str(self.port),
            "cmsshop.mail.smtp_security": "none",
            "cmsshop.mail.smtp_timeout": "5",
        }


@pytest.fixture
def smtp_server():
    server = FakeSmtpServer()
    server.up()
    yield server
    server.down()
