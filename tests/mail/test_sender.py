"""Delivering the outbox to a real SMTP server on loopback (tests/fakes/smtp.py).

Messages go out once each, with the headers a mail client needs; a failing server
leaves them pending with the error and they go out when it comes back; a sender killed
mid-batch loses none and sends none twice; two senders share the work; the worker stops
cleanly; the files backend writes parseable .eml files; admins see and resend messages.
"""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import webtest
from helpers.app import ROOT, requires_postgresql, write_admin_ini
from helpers.cli import start_admin
from helpers.clients import logged_in
from helpers.notices import flashed
from helpers.outbox import hostile_message, queue, rows
from pyramid.exceptions import ConfigurationError
from sqlalchemy import update

from cmsshop import logs
from cmsshop.models import OutboxMessage
from cmsshop.services.mail.delivery import FileBackend, SmtpBackend, make_mail_backend
from cmsshop.services.mail.sender import backoff, send_due
from cmsshop.settings import load_settings
from cmsshop.util import utcnow


def mail_settings(**overrides) -> dict:
    return load_settings(
        {"cmsshop.site_name": "Shop", "cmsshop.database_url": "sqlite://", **overrides},
        environ={},
    )


def smtp_backend(server) -> SmtpBackend:
    return make_mail_backend(mail_settings(**server.settings()))


# --- delivery ---------------------------------------------------------------------------------


def test_pending_messages_are_delivered_over_smtp_and_marked_sent(engine, dbsession, smtp_server):
    ids = queue(dbsession, 3)
    settings = mail_settings(**smtp_server.settings())
    report = send_due(engine, make_mail_backend(settings), settings)
    assert (report.sent, report.retried, report.failed) == (3, 0, 0)
    received = smtp_server.wait_for(3)
    assert [str(m["Message-ID"]) for m in received] == ids  # oldest first
    first = received[0]
    assert str(first["From"]) == "Shop <noreply@localhost>"
    assert str(first["To"]) == "m0@example.com"
    assert str(first["Subject"]) == "Your account 0 – ünïcode"
    assert email.utils.parsedate_to_datetime(str(first["Date"])).tzinfo is not None
    assert first.get_content_type() == "multipart/alternative"
    text = first.get_body(("plain",)).get_content()
    html = first.get_body(("html",)).get_content()
    assert "https://shop.example.com/login" in text and "<html" in html.lower()
    assert smtp_server.mailbox.envelopes[0][1] == ["m0@example.com"]
    for row in rows(dbsession):
        assert row.status == "sent" and row.sent_at is not None and row.attempts == 0
    # Nothing is due any more: a second pass sends nothing.
    assert send_due(engine, smtp_backend(smtp_server), settings).attempted == 0
    assert len(smtp_server.messages) == 3


def test_a_failing_server_leaves_messages_pending_until_it_comes_back(
    engine, dbsession, smtp_server
):
    queue(dbsession, 2)
    settings = mail_settings(**smtp_server.settings(), **{"cmsshop.mail.max_attempts": "3"})
    smtp_server.answer(451)
    before = utcnow()
    report = send_due(engine, make_mail_backend(settings), settings)
    assert (report.sent, report.retried) == (0, 2)
    for row in rows(dbsession):
        assert row.status == "pending" and row.attempts == 1
        assert "451" in row.last_error
        assert row.next_attempt_at >= before + dt.timedelta(seconds=50)
        assert row.claimed_until is None
    # Not due yet: the next pass leaves them alone.
    assert send_due(engine, make_mail_backend(settings), settings).attempted == 0
    # The server is down, then back; time passes (the clock is the sender's).
    smtp_server.down()
    later = utcnow() + dt.timedelta(hours=1)
    report = send_due(engine, make_mail_backend(settings), settings, clock=lambda: later)
    assert report.retried == 2
    assert all(row.attempts == 2 and "refused" in row.last_error.lower() for row in rows(dbsession))
    smtp_server.answer(None)
    smtp_server.up()
    much_later = later + dt.timedelta(hours=1)
    report = send_due(engine, make_mail_backend(settings), settings, clock=lambda: much_later)
    assert report.sent == 2
    assert len(smtp_server.wait_for(2)) == 2
    assert {row.status for row in rows(dbsession)} == {"sent"}


def test_a_message_fails_after_max_attempts(engine, dbsession, smtp_server):
    queue(dbsession, 1)
    settings = mail_settings(**smtp_server.settings(), **{"cmsshop.mail.max_attempts": "3"})
    smtp_server.answer(421)
    now = utcnow()
    for attempt in range(1, 4):
        now += dt.timedelta(days=1)
        report = send_due(engine, make_mail_backend(settings), settings, clock=lambda at=now: at)
        assert report.attempted == 1
        (row,) = rows(dbsession)
        assert row.attempts == attempt
    assert row.status == "failed" and "421" in row.last_error
    smtp_server.answer(None)
    now += dt.timedelta(days=1)
    assert send_due(engine, make_mail_backend(settings), settings, clock=lambda: now).attempted == 0
    assert smtp_server.messages == []


def test_a_recipient_refused_with_5xx_fails_at_once(engine, dbsession, smtp_server):
    queue(dbsession, 1)
    settings = mail_settings(**smtp_server.settings())
    smtp_server.refuse_recipients(550)
    report = send_due(engine, make_mail_backend(settings), settings)
    assert report.failed == 1
    (row,) = rows(dbsession)
    assert row.status == "failed" and row.attempts == 1 and "550" in row.last_error


def test_starttls_is_required_when_configured(engine, dbsession, smtp_server):
    """security = starttls against a server without it: no plain-text fallback."""
    queue(dbsession, 1)
    settings = mail_settings(
        **{**smtp_server.settings(), "cmsshop.mail.smtp_security": "starttls"},
        **{"cmsshop.mail.smtp_user": "shop", "cmsshop.mail.smtp_password": "s3cret-pass-word"},
    )
    report = send_due(engine, make_mail_backend(settings), settings)
    assert report.retried == 1
    (row,) = rows(dbsession)
    assert "STARTTLS" in row.last_error and "s3cret-pass-word" not in row.last_error
    assert smtp_server.messages == []


def test_backoff_grows_with_jitter():
    assert backoff(1, lambda: 0.5) == dt.timedelta(minutes=1)
    assert backoff(4, lambda: 0.5) == dt.timedelta(hours=1)
    assert backoff(50, lambda: 0.5) == dt.timedelta(hours=12)
    assert backoff(2, lambda: 0.0) == dt.timedelta(seconds=270)
    assert backoff(2, lambda: 1.0) == dt.timedelta(seconds=330)


def test_the_files_backend_writes_a_parseable_eml(engine, dbsession, tmp_path):
    ids = queue(dbsession, 2)
    folder = tmp_path / "mail"
    settings = mail_settings(**{"cmsshop.mail.backend": "files", "cmsshop.mail.dir": str(folder)})
    backend = make_mail_backend(settings)
    assert isinstance(backend, FileBackend)
    assert send_due(engine, backend, settings).sent == 2
    files = sorted(os.listdir(folder))
    assert len(files) == 2 and all(name.endswith(".eml") for name in files)
    row_ids = [row.id for row in rows(dbsession)]
    assert [name.rsplit("-", 1)[1] for name in files] == [f"{i}.eml" for i in row_ids]
    message = email.message_from_bytes(
        (folder / files[0]).read_bytes(), policy=email.policy.default
    )
    assert str(message["Message-ID"]) == ids[0]
    assert str(message["Subject"]) == "Your account 0 – ünïcode"
    assert "log in" in message.get_body(("plain",)).get_content()


# --- settings ---------------------------------------------------------------------------------


def test_smtp_without_a_host_refuses_to_start():
    with pytest.raises(ConfigurationError, match="smtp_host"):
        mail_settings(**{"cmsshop.mail.backend": "smtp"})
    with pytest.raises(ConfigurationError, match="cmsshop.mail.backend"):
        mail_settings(**{"cmsshop.mail.backend": "pigeon"})
    with pytest.raises(ConfigurationError, match="smtp_security"):
        mail_settings(**{"cmsshop.mail.smtp_security": "maybe"})
    settings = mail_settings(
        **{"cmsshop.mail.backend": "smtp", "cmsshop.mail.smtp_host": "mail.example.com"}
    )
    assert settings["cmsshop.mail.smtp_port"] == 587


def test_production_ini_with_smtp_and_no_host_fails_fast(monkeypatch):
    from pyramid.paster import get_app

    monkeypatch.setenv("CMSSHOP_SECRET", "p" * 48)
    monkeypatch.delenv("CMSSHOP_MAIL_SMTP_HOST", raising=False)
    with pytest.raises(ConfigurationError, match="CMSSHOP_MAIL_SMTP_HOST"):
        get_app(os.path.join(ROOT, "production.ini"))


def test_the_smtp_password_comes_from_the_environment_and_is_never_logged():
    settings = load_settings(
        {
            "cmsshop.mail.backend": "smtp",
            "cmsshop.mail.smtp_host": "mail.example.com",
            "cmsshop.mail.smtp_user": "shop",
        },
        environ={"CMSSHOP_MAIL_SMTP_PASSWORD": "an-env-password-42"},
    )
    assert settings["cmsshop.mail.smtp_password"] == "an-env-password-42"
    assert logs.safe_text("login failed for an-env-password-42") == "login failed for [redacted]"


# --- crashes and concurrency -------------------------------------------------------------------


@pytest.fixture
def mail_ini(tmp_path, database_url, storage_dir, smtp_server):
    """An ini for cmsshop-admin on the test database, delivering to the fake server."""
    smtp = smtp_server.settings()
    return write_admin_ini(
        tmp_path / "mail.ini",
        {
            "cmsshop.environment": "development",
            "cmsshop.database_url": database_url,
            "cmsshop.secret": "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz",
            "cmsshop.storage_dir": storage_dir,
            "cmsshop.password_hashing": "cheapest",
            "cmsshop.mail.backend": "smtp",
            "cmsshop.mail.smtp_host": smtp["cmsshop.mail.smtp_host"],
            "cmsshop.mail.smtp_port": smtp["cmsshop.mail.smtp_port"],
            "cmsshop.mail.smtp_security": "none",
            "cmsshop.mail.smtp_timeout": 5,
            "cmsshop.mail.worker_interval": 0.2,
        },
    )


def test_a_sender_killed_mid_batch_loses_nothing_and_sends_nothing_twice(
    mail_ini, dbsession, smtp_server
):
    ids = queue(dbsession, 5)
    smtp_server.delay = 0.5
    process = start_admin(mail_ini, "send-mail")
    try:
        smtp_server.wait_for(2, timeout=60)
        # The third message is in flight (the server has not answered DATA): kill now.
        smtp_server.wait_for_data(3, timeout=30)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert len(smtp_server.messages) == 2
    states = [row.status for row in rows(dbsession)]
    assert states == ["sent", "sent", "pending", "pending", "pending"]
    if dbsession.get_bind().dialect.name == "sqlite":
        # The killed sender's claim on the third message holds for the lease
        # (cmsshop.mail.claim_lease); let it expire rather than wait ten minutes.
        claimed = [row.id for row in rows(dbsession) if row.claimed_until is not None]
        assert len(claimed) == 1
        dbsession.execute(
            update(OutboxMessage).values(claimed_until=utcnow() - dt.timedelta(seconds=1))
        )
        dbsession.commit()
    smtp_server.delay = 0
    again = subprocess.run(
        [sys.executable, "-m", "cmsshop.scripts.admin", mail_ini, "send-mail"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert again.returncode == 0, again.stderr
    assert "3 sent" in again.stdout
    assert sorted(smtp_server.message_ids) == sorted(ids)  # each exactly once
    assert {row.status for row in rows(dbsession)} == {"sent"}


@requires_postgresql
def test_two_senders_at_once_deliver_each_message_once(engine, dbsession, smtp_server):
    ids = queue(dbsession, 30)
    settings = mail_settings(**smtp_server.settings())
    smtp_server.delay = 0.02
    reports = []
    start = threading.Barrier(2)

    def sender():
        start.wait()
        reports.append(send_due(engine, make_mail_backend(settings), settings))

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(report.sent for report in reports) == 30
    assert all(report.sent > 0 for report in reports)  # both took a share
    assert sorted(smtp_server.message_ids) == sorted(ids)
    assert {row.status for row in rows(dbsession)} == {"sent"}


def test_the_worker_stops_cleanly_on_sigterm_after_the_message_in_flight(
    mail_ini, dbsession, smtp_server
):
    ids = queue(dbsession, 2)
    smtp_server.delay = 1.0
    process = start_admin(mail_ini, "worker")
    try:
        smtp_server.wait_for(1, timeout=60)
        smtp_server.wait_for_data(2, timeout=30)  # the second one is in flight
        process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = process.wait(timeout=10)
        elapsed = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
        _, stderr = process.communicate()
    assert code == 0, stderr
    assert elapsed < 5
    assert smtp_server.message_ids == ids
    assert [row.status for row in rows(dbsession)] == ["sent", "sent"]
    assert "SIGTERM received" in stderr and "worker: stopped" in stderr
    sent_lines = [line for line in stderr.splitlines() if " sent: account_exists to " in line]
    assert len(sent_lines) == 2
    assert "log in" not in stderr  # no bodies in the log


def test_send_mail_with_a_bad_setting_is_a_configuration_error(tmp_path, mail_ini):
    text = Path(mail_ini).read_text().replace("cmsshop.mail.smtp_security = none", "")
    text = text.replace("cmsshop.mail.smtp_timeout = 5", "cmsshop.mail.smtp_timeout = soon")
    bad = tmp_path / "bad.ini"
    bad.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "cmsshop.scripts.admin", str(bad), "send-mail"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "configuration error" in result.stderr and "smtp_timeout" in result.stderr


# --- the admin outbox ---------------------------------------------------------------------------


def test_admin_outbox_list_filter_and_paging(app, admin, dbsession):
    queue(dbsession, 3)
    hostile_message(dbsession)
    client = logged_in(app, admin.email)
    page = client.get("/admin/mail", status=200)
    assert page.html.title.text.startswith("Mail outbox")
    assert page.html.find("h1").text == "Mail outbox"
    assert 'aria-current="page"' in str(page.html.find("a", href="/admin/mail"))
    assert page.text.count("/admin/mail/") >= 4
    assert "&lt;b&gt;Subject&lt;/b&gt;" in page.text and "<b>Subject</b>" not in page.text
    failed = client.get("/admin/mail", {"status": "failed"}, status=200)
    assert "m0@example.com" not in failed.text and "x@example.com" in failed.text
    assert "451 4.3.0" in failed.text
    paged = client.get("/admin/mail", {"perPage": "2", "page": "2"}, status=200)
    assert "Page 2 of 2" in paged.text
    for query in ({"status": "nope"}, {"page": "0"}, {"status": "a\x00b"}):
        assert client.get("/admin/mail", query, expect_errors=True).status_int == 422


def test_admin_message_page_shows_the_html_body_escaped(app, admin, dbsession):
    row = hostile_message(dbsession)
    client = logged_in(app, admin.email)
    page = client.get(f"/admin/mail/{row.id}", status=200)
    assert page.html.title.text.startswith(f"Mail message {row.id}")
    assert "<script>alert" not in page.text and 'onclick="x()"' not in page.text
    assert "&lt;script&gt;alert(&#34;admin&#34;)&lt;/script&gt;" in page.text
    assert "&lt;hostile-1@example.com&gt;" in page.text  # the Message-ID header
    assert "text &lt;i&gt;part&lt;/i&gt;" in page.text
    for bad in ("0", "x", "99999999999999999999", str(row.id + 1000)):
        assert client.get(f"/admin/mail/{bad}", expect_errors=True).status_int == 404


def test_admin_resend_puts_a_message_back_in_the_queue(app, admin, dbsession, smtp_server, engine):
    row = hostile_message(dbsession)
    client = logged_in(app, admin.email)
    page = client.get(f"/admin/mail/{row.id}")
    form = next(f for f in page.forms.values() if f.action.endswith("/resend"))
    response = form.submit(status=303)
    assert response.location.endswith(f"/admin/mail/{row.id}")
    assert flashed(response) == "mail_resent"
    (again,) = rows(dbsession)
    assert (again.status, again.attempts) == ("pending", 0)
    assert again.last_error.startswith(f"resend requested by {admin.email}")
    assert "was failed: 451" in again.last_error
    shown = response.follow()
    assert "queued again" in shown.text and "Resend this message" not in shown.text
    settings = mail_settings(**smtp_server.settings())
    assert send_due(engine, make_mail_backend(settings), settings).sent == 1
    assert smtp_server.message_ids == ["<hostile-1@example.com>"]


def test_admin_outbox_refuses_customers_and_requests_without_csrf(app, admin, customer, dbsession):
    row = hostile_message(dbsession)
    customer_client = logged_in(app, customer.email)
    assert customer_client.get("/admin/mail", status=403).content_type == "text/html"
    assert customer_client.get(f"/admin/mail/{row.id}", status=403)
    client = logged_in(app, admin.email)
    client.post(f"/admin/mail/{row.id}/resend", {}, status=403)
    client.post(f"/admin/mail/{row.id}/resend", {"csrf_token": "forged"}, status=403)
    assert rows(dbsession)[0].status == "failed"
    visitor = webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "127.0.0.1"})
    assert "/login?next=" in visitor.get("/admin/mail", status=303).location


def test_admin_mail_json_list_and_resend(admin_app, customer_app, dbsession):
    queue(dbsession, 2)
    row = hostile_message(dbsession)
    body = admin_app.get("/api/admin/mail", status=200).json
    assert body["total"] == 3 and body["items"][0]["id"] == row.id  # newest first
    item = body["items"][0]
    assert item["status"] == "failed" and item["messageId"] == "<hostile-1@example.com>"
    assert "html" not in str(sorted(item)).lower()
    pending = admin_app.get("/api/admin/mail", {"status": "pending"}).json
    assert pending["total"] == 2
    resent = admin_app.post(f"/api/admin/mail/{row.id}/resend", status=200).json
    assert resent["status"] == "pending" and resent["attempts"] == 0
    again = admin_app.post(f"/api/admin/mail/{row.id}/resend", status=409).json
    assert again["code"] == "mail_message_pending"
    missing = admin_app.post("/api/admin/mail/999999/resend", status=404).json
    assert missing["code"] == "mail_message_not_found"
    admin_app.post(f"/api/admin/mail/{row.id}/resend", headers={"X-CSRF-Token": "x"}, status=403)
    customer_app.get("/api/admin/mail", status=403)
    customer_app.post(f"/api/admin/mail/{row.id}/resend", status=403)
