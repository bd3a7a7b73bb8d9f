"""Settings: defaults, CMSSHOP_* environment overrides, coercion, fail-fast checks.

Only core settings live here. Feature modules declare their own settings with
:func:`declare` in their ``includeme`` so that a module owns its configuration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from pyramid.exceptions import ConfigurationError

DEVELOPMENT_SECRET = "development-secret-change-me-0123456789abcdef"
DEFAULT_SECRETS = {"", "change-me", "changeme", "secret", DEVELOPMENT_SECRET}
MIN_SECRET_LENGTH = 32


def as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {value!r}")


def as_int(value: Any) -> int:
    return int(str(value).strip())


def as_list(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return str(value or "").split()


def as_str(value: Any) -> str:
    return str(value).strip()


def as_float(value: Any) -> float:
    return float(str(value).strip())


def as_optional_int(value: Any) -> int | None:
    """An integer, or None for an empty value."""
    text = str(value if value is not None else "").strip()
    return int(text) if text else None


def as_auto_bool(value: Any) -> bool | None:
    """``auto`` (None: decided by the environment) or a boolean."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    return as_bool(value)


def as_secret(value: Any) -> str:
    """A secret as given (surrounding spaces may be part of a password)."""
    return "" if value is None else str(value)


def one_of(*choices: str) -> Callable[[Any], str]:
    """A coercer accepting only ``choices`` (case-insensitive)."""

    def coerce(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"use one of {', '.join(choices)}")
        return text

    return coerce


def as_rate(value: Any) -> tuple[int, int]:
    """``"120/60"`` -> (120 requests, per 60 seconds)."""
    if isinstance(value, tuple):
        return value
    count, _, seconds = str(value).strip().partition("/")
    limit, window = int(count), int(seconds)
    if limit < 1 or window < 1:
        raise ValueError("use COUNT/SECONDS with both at least 1, e.g. 120/60")
    return limit, window


# name -> (coercer, default, environment variable or None)
CORE_SETTINGS: dict[str, tuple[Callable[[Any], Any], Any, str | None]] = {
    "cmsshop.environment": (as_str, "development", "CMSSHOP_ENVIRONMENT"),
    "cmsshop.database_url": (as_str, "sqlite:///var/cmsshop.sqlite", "CMSSHOP_DATABASE_URL"),
    "cmsshop.secret": (as_str, "", "CMSSHOP_SECRET"),
    # Seconds / milliseconds; a stalled database answers 503 within these.
    "cmsshop.db_connect_timeout": (as_int, 5, None),
    "cmsshop.db_statement_timeout_ms": (as_int, 5000, None),
    "cmsshop.db_pool_timeout": (as_int, 5, None),
    "cmsshop.db_busy_timeout_ms": (as_int, 5000, None),
    # Seconds the app waits for any answer of PostgreSQL's (more than the statement
    # timeout, which a frozen server cannot enforce); 0 waits forever.
    "cmsshop.db_answer_timeout": (as_float, 6.0, None),
    # Seconds a successful /api/health database probe answers for the calls after it.
    "cmsshop.health_fresh": (as_float, 0.25, None),
    "cmsshop.site_name": (as_str, "cmsshop", "CMSSHOP_SITE_NAME"),
    "cmsshop.base_url": (as_str, "http://127.0.0.1:6543", "CMSSHOP_BASE_URL"),
    "cmsshop.modules": (as_list, [], "CMSSHOP_MODULES"),
    "cmsshop.registration_open": (as_bool, True, "CMSSHOP_REGISTRATION_OPEN"),
    "cmsshop.session_cookie_secure": (as_bool, False, None),
    "cmsshop.session_max_age": (as_int, 14 * 24 * 3600, None),
    "cmsshop.max_body_bytes": (as_int, 1024 * 1024, None),
    "cmsshop.login_max_failures": (as_int, 5, None),
    "cmsshop.login_failure_window": (as_int, 300, None),
    "cmsshop.register_max_per_ip": (as_int, 5, None),
    "cmsshop.register_window": (as_int, 3600, None),
    # Lifetimes (seconds) of the links mailed for a password reset and a verification.
    "cmsshop.password_reset_ttl": (as_int, 3600, None),
    "cmsshop.verify_email_ttl": (as_int, 7 * 24 * 3600, None),
    # Lifetime of the set-password link in the receipt of a guest checkout's new account.
    "cmsshop.guest_link_ttl": (as_int, 7 * 24 * 3600, None),
    "cmsshop.password_reset_max_per_email": (as_int, 3, None),
    "cmsshop.password_reset_max_per_ip": (as_int, 20, None),
    "cmsshop.password_reset_window": (as_int, 3600, None),
    "cmsshop.storage_dir": (as_str, "var/files", "CMSSHOP_STORAGE_DIR"),
    # Days after its expiry a license can still be renewed from its old expiry (checkout
    # sells renewals, fulfilment applies them: core, as both sides read it).
    "cmsshop.license_renewal_grace_days": (as_int, 30, None),
    # Days before its expiry a license is offered a renewal on the customer's licenses
    # page (not the day after it was bought).
    "cmsshop.license_renewal_window_days": (as_int, 30, None),
    # Days a subscription's license stays valid past its paid period while the provider
    # still retries the card (services/subscriptions/lifecycle.py); Stripe's default
    # retry schedule ends within three weeks.
    "cmsshop.subscription_grace_days": (as_int, 21, None),
    # Days before a long subscription (billed every three months or less often) renews
    # itself that remind-renewals tells the buyer (services/subscriptions/reminders.py).
    "cmsshop.subscription_reminder_days": (as_int, 14, None),
    "cmsshop.demo_data": (as_bool, False, None),
    # The answer cache of public catalogue and docs answers (cmsshop.cache): seconds an
    # answer is fresh (0 turns the cache off), seconds a stale one is still served while
    # one request refreshes it, seconds between checks of the cross-process version, and
    # its bounds.
    "cmsshop.answer_cache_ttl": (as_float, 300.0, "CMSSHOP_ANSWER_CACHE_TTL"),
    "cmsshop.answer_cache_stale": (as_float, 30.0, None),
    "cmsshop.answer_cache_check_interval": (as_float, 1.0, None),
    "cmsshop.answer_cache_entries": (as_int, 50_000, None),
    "cmsshop.answer_cache_bytes": (as_int, 64 * 1024 * 1024, None),
    "cmsshop.password_hashing": (as_str, "default", None),
    "retry.attempts": (as_int, 3, None),
    # E-mail (services/mail): the outbox's delivery. smtp for real mail; files writes
    # each message as an .eml file under mail.dir (development, tests, staging).
    "cmsshop.mail.backend": (one_of("smtp", "files"), "files", "CMSSHOP_MAIL_BACKEND"),
    # The From header; empty means "<site_name> <noreply@localhost>".
    "cmsshop.mail.from": (as_str, "", "CMSSHOP_MAIL_FROM"),
    "cmsshop.mail.dir": (as_str, "var/mail", "CMSSHOP_MAIL_DIR"),
    "cmsshop.mail.smtp_host": (as_str, "", "CMSSHOP_MAIL_SMTP_HOST"),
    # Empty: 465 for tls, 587 for starttls, 25 for none.
    "cmsshop.mail.smtp_port": (as_optional_int, None, "CMSSHOP_MAIL_SMTP_PORT"),
    "cmsshop.mail.smtp_security": (
        one_of("starttls", "tls", "none"),
        "starttls",
        "CMSSHOP_MAIL_SMTP_SECURITY",
    ),
    "cmsshop.mail.smtp_user": (as_str, "", "CMSSHOP_MAIL_SMTP_USER"),
    # Better from the environment than from an ini file; never logged (cmsshop.logs).
    "cmsshop.mail.smtp_password": (as_secret, "", "CMSSHOP_MAIL_SMTP_PASSWORD"),
    "cmsshop.mail.smtp_timeout": (as_float, 20.0, "CMSSHOP_MAIL_SMTP_TIMEOUT"),
    # Attempts before a message is given up as failed (an admin may resend it).
    "cmsshop.mail.max_attempts": (as_int, 8, None),
    # Seconds the worker sleeps between passes over the outbox.
    "cmsshop.mail.worker_interval": (as_float, 5.0, None),
    # Seconds a SQLite sender's claim on a message lasts (a killed sender's message is
    # retried after it); must outlast an SMTP conversation (smtp_timeout).
    "cmsshop.mail.claim_lease": (as_int, 600, None),
}


def declare(
    settings: dict[str, Any],
    spec: Mapping[str, tuple[Callable[[Any], Any], Any, str | None]],
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Coerce ``spec`` keys of ``settings`` in place: environment beats ini beats default.

    A value that does not coerce stops start-up with the setting's name in the message.
    """
    environ = os.environ if environ is None else environ
    for name, (coerce, default, env_name) in spec.items():
        raw = settings.get(name, default)
        if env_name and environ.get(env_name) not in (None, ""):
            raw = environ[env_name]
        try:
            settings[name] = coerce(raw) if raw is not default else default
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"setting {name} = {raw!r} is invalid: {exc}") from exc
    return settings


def load_settings(settings: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict:
    """Return a coerced copy of the ini settings with core defaults and env overrides."""
    result = dict(settings)
    if "sqlalchemy.url" in result and "cmsshop.database_url" not in result:
        result["cmsshop.database_url"] = result["sqlalchemy.url"]
    declare(result, CORE_SETTINGS, environ)
    check_secret(result)
    check_mail(result)
    if not 0 <= result["cmsshop.license_renewal_grace_days"] <= 3650:
        raise ConfigurationError("cmsshop.license_renewal_grace_days must be 0..3650")
    if not 0 <= result["cmsshop.license_renewal_window_days"] <= 3650:
        raise ConfigurationError("cmsshop.license_renewal_window_days must be 0..3650")
    if not 0 <= result["cmsshop.subscription_grace_days"] <= 365:
        raise ConfigurationError("cmsshop.subscription_grace_days must be 0..365")
    if not 1 <= result["cmsshop.subscription_reminder_days"] <= 365:
        raise ConfigurationError("cmsshop.subscription_reminder_days must be 1..365")
    return result


def check_secret(settings: Mapping[str, Any]) -> None:
    """Production refuses a missing, default or short secret; development gets a fixed one."""
    secret = settings.get("cmsshop.secret", "")
    production = settings["cmsshop.environment"] == "production"
    if production and (secret in DEFAULT_SECRETS or len(secret) < MIN_SECRET_LENGTH):
        raise ConfigurationError(
            "cmsshop.secret is missing or a default value: set CMSSHOP_SECRET to a random "
            f"string of at least {MIN_SECRET_LENGTH} characters, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
        )
    if production and settings.get("cmsshop.password_hashing") != "default":
        raise ConfigurationError("cmsshop.password_hashing must be 'default' in production")
    if not secret:
        # Only reachable outside production: a stable development secret.
        settings["cmsshop.secret"] = DEVELOPMENT_SECRET  # type: ignore[index]


SMTP_DEFAULT_PORTS = {"tls": 465, "starttls": 587, "none": 25}


def check_mail(settings: dict) -> None:
    """Mail settings that cannot work stop start-up (not the first message's delivery);
    fills in the From address and the SMTP port from their defaults."""
    from email.utils import formataddr, parseaddr

    from cmsshop import logs

    # The password is redacted from every log line and stored error, whoever writes it.
    logs.register_secret(settings["cmsshop.mail.smtp_password"])
    if settings["cmsshop.mail.backend"] == "smtp" and not settings["cmsshop.mail.smtp_host"]:
        raise ConfigurationError(
            "cmsshop.mail.backend is smtp but cmsshop.mail.smtp_host is empty: set "
            "CMSSHOP_MAIL_SMTP_HOST (and port, security, user, CMSSHOP_MAIL_SMTP_PASSWORD), "
            "or use cmsshop.mail.backend = files to write messages to cmsshop.mail.dir"
        )
    if settings["cmsshop.mail.backend"] == "files" and not settings["cmsshop.mail.dir"]:
        raise ConfigurationError("cmsshop.mail.backend is files but cmsshop.mail.dir is empty")
    port = settings["cmsshop.mail.smtp_port"]
    if port is None:
        settings["cmsshop.mail.smtp_port"] = SMTP_DEFAULT_PORTS[
            settings["cmsshop.mail.smtp_security"]
        ]
    elif not 0 < port < 65536:
        raise ConfigurationError(f"cmsshop.mail.smtp_port = {port} is not a TCP port")
    if settings["cmsshop.mail.smtp_password"] and not settings["cmsshop.mail.smtp_user"]:
        raise ConfigurationError("cmsshop.mail.smtp_password is set without smtp_user")
    for name, low in (
        ("smtp_timeout", 1),
        ("max_attempts", 1),
        ("worker_interval", 0.1),
        ("claim_lease", 1),
    ):
        if settings[f"cmsshop.mail.{name}"] < low:
            raise ConfigurationError(f"cmsshop.mail.{name} must be at least {low}")
    if settings["cmsshop.mail.claim_lease"] <= settings["cmsshop.mail.smtp_timeout"] * 3:
        # One message is a few SMTP exchanges, each up to smtp_timeout: a lease shorter
        # than that would let a second sender take a message still being sent.
        raise ConfigurationError(
            "cmsshop.mail.claim_lease must be more than 3 x cmsshop.mail.smtp_timeout"
        )
    sender = settings["cmsshop.mail.from"]
    if not sender:
        site = settings.get("cmsshop.site_name") or "cmsshop"
        sender = formataddr((site, "noreply@localhost"))
    name, address = parseaddr(sender)
    if "@" not in address or any(c in sender for c in "\r\n"):
        raise ConfigurationError(f"cmsshop.mail.from = {sender!r} is not an e-mail address")
    settings["cmsshop.mail.from"] = sender
