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
    "cmsshop.password_reset_max_per_email": (as_int, 3, None),
    "cmsshop.password_reset_max_per_ip": (as_int, 20, None),
    "cmsshop.password_reset_window": (as_int, 3600, None),
    "cmsshop.storage_dir": (as_str, "var/files", "CMSSHOP_STORAGE_DIR"),
    "cmsshop.demo_data": (as_bool, False, None),
    "cmsshop.password_hashing": (as_str, "default", None),
    "retry.attempts": (as_int, 3, None),
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
