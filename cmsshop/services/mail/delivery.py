"""Turning an outbox row into a message, and handing it to a mail backend.

Two backends behind one small interface (``send(message, outbox_id)`` and ``close()``),
chosen by ``cmsshop.mail.backend``:

smtp   smtplib: implicit TLS (``tls``, SMTP_SSL), STARTTLS (``starttls``, refused if the
       server does not offer it) or plain (``none``, for a relay on loopback); login
       when a user is set; every socket operation bounded by ``smtp_timeout``.
files  one ``<timestamp>-<id>.eml`` file per message under ``cmsshop.mail.dir``, written
       to a temporary name and renamed, so a reader never sees half a message.

A failure is a :class:`DeliveryFailed` saying whether trying again can help.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.policy
import os
import smtplib
import socket
import ssl
import tempfile
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Protocol

from cmsshop.logs import redact
from cmsshop.services.mail.headers import header_address, header_mailbox, header_text
from cmsshop.services.mail.outbox import with_token
from cmsshop.util import utcnow

MAX_ERROR_LENGTH = 1000


class DeliveryFailed(Exception):
    """A message was not accepted. ``permanent``: trying again cannot help (the server
    refused the recipient with a 5xx reply, or the message cannot be built)."""

    def __init__(self, text: str, *, permanent: bool = False):
        super().__init__(text)
        self.text = redact(text)[:MAX_ERROR_LENGTH]
        self.permanent = permanent


class MailBackend(Protocol):
    def send(self, message: EmailMessage, outbox_id: int) -> None:
        """Deliver ``message`` or raise :class:`DeliveryFailed`."""

    def close(self) -> None:
        """Let go of any connection (between passes of the worker)."""


def build_email(
    row, from_address: str, *, now: dt.datetime | None = None, token: str | None = None
) -> EmailMessage:
    """The MIME message of an outbox row: plain text with an HTML alternative, UTF-8,
    and the row's own Message-ID (fixed when it was queued, so a message delivered twice
    is one message to the recipient's mail client). ``token``: the one the sender issued
    for the row's masked link; without it the link stays masked (the admin's view).

    Every header made of typed text (the site name in From, the address, the subject)
    goes through ``headers`` first; an address that cannot be put in a header as it is
    raises :class:`UnsafeAddress` (a ValueError: the message can never be sent)."""
    message = EmailMessage(policy=email.policy.SMTP)
    message["From"] = header_mailbox(from_address)
    message["To"] = header_address(row.to_address)
    message["Subject"] = header_text(row.subject)
    message["Date"] = format_datetime(now or utcnow(), usegmt=True)
    message["Message-ID"] = row.message_id
    # RFC 3834: an automatic message, so auto-responders do not answer it.
    message["Auto-Submitted"] = "auto-generated"
    text, html = row.text_body, row.html_body
    if token is not None:
        text, html = with_token(text, token), with_token(html, token)
    message.set_content(text, charset="utf-8")
    message.add_alternative(html, subtype="html", charset="utf-8")
    return message


def smtp_error_text(exc: BaseException) -> str:
    """What went wrong, for ``last_error``: the server's reply code and text, or the
    kind of network error (never the credentials: smtplib does not put them in
    exceptions, and ``redact`` removes the configured password anyway)."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        parts = []
        for recipient, (code, reply) in exc.recipients.items():
            parts.append(f"{code} {_decode(reply)} ({recipient})")
        return "recipient refused: " + "; ".join(parts)
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"{type(exc).__name__}: {exc.smtp_code} {_decode(exc.smtp_error)}"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"timeout: {exc}" if str(exc) else "timeout"
    return f"{type(exc).__name__}: {exc}"


def _decode(reply) -> str:
    if isinstance(reply, bytes):
        return reply.decode("utf-8", "replace")
    return str(reply)


def is_permanent(exc: BaseException) -> bool:
    """A 5xx reply to the recipient (RCPT TO): the mailbox does not exist or never takes
    mail from us. Trying again for hours cannot change that and repeated attempts at a
    dead address hurt the sender's reputation, so the message fails at once.

    Every other error is retried with back-off until max_attempts, 5xx replies included:
    a 5xx to AUTH, MAIL FROM or DATA is most often our own configuration (credentials,
    an unverified sender domain, a relay not allowed) that an operator can fix within
    the retry window, and 4xx replies and network errors are temporary by definition.
    """
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in exc.recipients.values())
    return False


class SmtpBackend:
    """Delivery over SMTP; one connection kept across a pass and dropped on any error
    (so the next message starts from a clean session)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        security: str = "starttls",
        user: str = "",
        password: str = "",
        timeout: float = 20.0,
    ):
        self.host, self.port, self.security = host, port, security
        self.user, self.password, self.timeout = user, password, timeout
        self._connection: smtplib.SMTP | None = None

    def _connect(self) -> smtplib.SMTP:
        context = ssl.create_default_context()
        if self.security == "tls":
            connection: smtplib.SMTP = smtplib.SMTP_SSL(
                self.host, self.port, timeout=self.timeout, context=context
            )
        else:
            connection = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
        try:
            connection.ehlo()
            if self.security == "starttls":
                # starttls() raises SMTPNotSupportedError when the server does not offer
                # it: the password is never sent in clear by mistake.
                connection.starttls(context=context)
                connection.ehlo()
            if self.user:
                connection.login(self.user, self.password)
        except BaseException:
            _quietly_close(connection)
            raise
        return connection

    def send(self, message: EmailMessage, outbox_id: int) -> None:
        try:
            if self._connection is None:
                self._connection = self._connect()
            self._connection.send_message(message)
        except (smtplib.SMTPException, OSError) as exc:
            self.close()
            raise DeliveryFailed(smtp_error_text(exc), permanent=is_permanent(exc)) from exc
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.quit()
            except (smtplib.SMTPException, OSError):
                _quietly_close(connection)


def _quietly_close(connection: smtplib.SMTP) -> None:
    with contextlib.suppress(OSError):
        connection.close()


class FileBackend:
    """Each message as an .eml file in ``directory`` (made if missing)."""

    def __init__(self, directory: str):
        self.directory = directory

    def send(self, message: EmailMessage, outbox_id: int) -> None:
        try:
            os.makedirs(self.directory, exist_ok=True)
            stamp = utcnow().strftime("%Y%m%dT%H%M%S%fZ")
            final = os.path.join(self.directory, f"{stamp}-{outbox_id}.eml")
            handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(message.as_bytes())
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temporary, final)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as exc:
            raise DeliveryFailed(f"cannot write to {self.directory}: {exc}") from exc

    def close(self) -> None:
        pass


def make_mail_backend(settings) -> MailBackend:
    """The backend ``cmsshop.mail.backend`` names (settings validated at start-up)."""
    if settings["cmsshop.mail.backend"] == "smtp":
        return SmtpBackend(
            settings["cmsshop.mail.smtp_host"],
            settings["cmsshop.mail.smtp_port"],
            security=settings["cmsshop.mail.smtp_security"],
            user=settings["cmsshop.mail.smtp_user"],
            password=settings["cmsshop.mail.smtp_password"],
            timeout=settings["cmsshop.mail.smtp_timeout"],
        )
    return FileBackend(settings["cmsshop.mail.dir"])
