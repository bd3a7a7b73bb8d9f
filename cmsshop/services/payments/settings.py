"""Provider settings: ini defaults, admin overrides, encryption.

A provider's *config* (the mapping handed to ``verify``/``confirm``/``create_checkout``)
is built here: every admin-editable field (``provider.settings_fields``, camelCase JSON
names) from the admin's saved value or else the ini default, the ini-only extra settings
the plugin declared, and ``signatureTolerance`` (seconds; 0 = no age check, used only when
an admin reprocesses a stored delivery).

Secrets are encrypted at rest (cmsshop.crypto: Fernet under a key derived from
``cmsshop.secret`` for this purpose). Changing the
server secret makes saved secrets unreadable: they are then treated as unset (the ini
default applies) and logged, and an admin saves them again.

Webhook deliveries and the queue worker read the config through a per-process cache
(``ConfigCache``): at most one database read per provider every
``cmsshop.payments.config_ttl`` seconds (5 by default). A commit that writes
``payment_settings`` empties the caches of its own process at once; other processes see
the change when their entry expires. Admin views always read afresh (they pass a session).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from cryptography.fernet import InvalidToken
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from cmsshop import crypto
from cmsshop.db import own_transaction
from cmsshop.models import PaymentSetting
from cmsshop.services.payments.registry import PaymentProviders, ProviderSpec
from cmsshop.util import utcnow

log = logging.getLogger(__name__)

DEFAULT_SIGNATURE_TOLERANCE = 300
MAX_VALUE_LENGTH = 2000
MAX_LIST_ITEMS = 10


def snake(name: str) -> str:
    """``webhookSecrets`` -> ``webhook_secrets`` (ini and environment names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def ini_name(provider: str, field: str) -> str:
    return f"cmsshop.{provider}.{snake(field)}"


def env_name(provider: str, field: str) -> str:
    return f"CMSSHOP_{provider.upper()}_{snake(field).upper()}"


# --- encryption --------------------------------------------------------------------------


# The key's HKDF salt: what these values are (cmsshop.crypto).
PURPOSE = b"cmsshop payment settings"


def encrypt_value(server_secret: str, value: Any) -> str:
    return crypto.encrypt_value(server_secret, value, PURPOSE)


def decrypt_value(server_secret: str, token: str) -> Any:
    """Raise InvalidToken when the token was made under another server secret."""
    return crypto.decrypt_value(server_secret, token, PURPOSE)


def mask_secret(value: str) -> str:
    """Never the whole secret: the last 4 characters of a long one, nothing of a short one."""
    if not value:
        return ""
    return "****" + value[-4:] if len(value) >= 12 else "****"


# --- reading -----------------------------------------------------------------------------


def ini_default(settings: Mapping[str, Any], spec: ProviderSpec, field: str) -> Any:
    value = settings.get(ini_name(spec.name, field))
    if field in spec.list_fields:
        return list(value or [])
    return value or ""


def saved_values(session: Session, settings: Mapping[str, Any], spec: ProviderSpec) -> dict:
    """The admin-saved values of ``spec`` (decrypted); unreadable ones are left out."""
    rows = session.scalars(select(PaymentSetting).where(PaymentSetting.provider == spec.name))
    values = {}
    for row in rows:
        if row.field not in spec.fields:
            continue  # a field the provider no longer has
        try:
            if row.encrypted:
                values[row.field] = decrypt_value(settings["cmsshop.secret"], row.value)
            else:
                values[row.field] = json.loads(row.value)
        except (InvalidToken, ValueError):
            log.warning(
                "saved %s.%s cannot be decrypted (was cmsshop.secret changed?); "
                "using the ini default until an admin saves it again",
                spec.name,
                row.field,
            )
    return values


def effective_values(
    session: Session, settings: Mapping[str, Any], spec: ProviderSpec
) -> tuple[dict, dict]:
    """(values, sources): each field's value and where it came from (admin/ini/unset)."""
    saved = saved_values(session, settings, spec)
    values, sources = {}, {}
    for field in spec.fields:
        if field in saved:
            values[field], sources[field] = saved[field], "admin"
        else:
            default = ini_default(settings, spec, field)
            values[field] = default
            sources[field] = "ini" if default else "unset"
    return values, sources


def provider_config(
    registry, spec: ProviderSpec, session: Session | None = None, *, tolerance: int | None = None
) -> dict[str, Any]:
    """The config mapping handed to the provider (see the module docstring).

    Without ``session`` the saved values come from the process's ``ConfigCache``, read
    when stale in a short session of their own, so a webhook reads nothing through
    request.db before its first write (on SQLite a read snapshot taken earlier could not
    be upgraded to a write after our own commits).
    """
    settings = registry.settings
    if session is None:
        values = config_cache(registry).values(spec.name, lambda: _read_values(registry, spec))
    else:
        values, _ = effective_values(session, settings, spec)
    for name in spec.extra_settings:
        values[name] = settings.get(ini_name(spec.name, name))
    if tolerance is None:
        tolerance = settings.get(
            ini_name(spec.name, "signatureTolerance"), DEFAULT_SIGNATURE_TOLERANCE
        )
    values["signatureTolerance"] = tolerance
    return values


def _read_values(registry, spec: ProviderSpec) -> dict[str, Any]:
    with own_transaction(registry) as own:
        values, _ = effective_values(own, registry.settings, spec)
    return values


# --- the per-process cache of deliveries' config ------------------------------------------

_ALL_CONFIG_CACHES: weakref.WeakSet[ConfigCache] = weakref.WeakSet()
_WROTE_SETTINGS = "cmsshop.payment_settings_written"


class ConfigCache:
    """Each provider's effective values, kept ``ttl`` seconds (0: never kept)."""

    def __init__(self, ttl: float, clock=time.monotonic):
        self.ttl, self.clock = ttl, clock
        self.entries: dict[str, tuple[float, dict[str, Any]]] = {}
        # Bumped by clear(): a read that started before a write committed is not kept.
        self.generation = 0
        self.lock = threading.Lock()
        _ALL_CONFIG_CACHES.add(self)

    def values(self, provider: str, read) -> dict[str, Any]:
        """A copy of ``provider``'s values, from ``read()`` when missing or expired."""
        entry = self.entries.get(provider)
        if entry is None or entry[0] <= self.clock():
            generation, expires = self.generation, self.clock() + self.ttl
            fresh = read()
            if self.ttl > 0:
                with self.lock:
                    if generation == self.generation:
                        self.entries[provider] = (expires, fresh)
            return dict(fresh)
        return dict(entry[1])

    def clear(self) -> None:
        with self.lock:
            self.generation += 1
            self.entries.clear()


def config_cache(registry) -> ConfigCache:
    cache = registry.get("cmsshop.payments.config_cache")
    if cache is None:
        ttl = float(registry.settings.get("cmsshop.payments.config_ttl", 5.0))
        cache = registry.setdefault("cmsshop.payments.config_cache", ConfigCache(ttl))
    return cache


def clear_config_caches() -> None:
    for cache in list(_ALL_CONFIG_CACHES):
        cache.clear()


@event.listens_for(Session, "before_flush")
def _note_settings_flush(session, flush_context, instances):
    changed = (*session.new, *session.dirty, *session.deleted)
    if any(isinstance(obj, PaymentSetting) for obj in changed):
        session.info[_WROTE_SETTINGS] = True


@event.listens_for(Session, "do_orm_execute")
def _note_settings_statement(state):
    if state.is_insert or state.is_update or state.is_delete:
        table = getattr(getattr(state.statement, "table", None), "name", None)
        if table == PaymentSetting.__tablename__:
            state.session.info[_WROTE_SETTINGS] = True


@event.listens_for(Session, "after_commit")
def _clear_after_settings_commit(session):
    if session.info.pop(_WROTE_SETTINGS, None):
        clear_config_caches()


@event.listens_for(Session, "after_rollback")
def _forget_settings_on_rollback(session):
    session.info.pop(_WROTE_SETTINGS, None)


@dataclasses.dataclass(frozen=True)
class ProviderSettings:
    """One provider's settings as an admin may see them (secrets masked) and where each
    value came from (admin / ini / unset)."""

    name: str
    values: dict[str, Any]
    sources: dict[str, str]


def masked_settings(
    session: Session, settings: Mapping[str, Any], providers: PaymentProviders
) -> list[ProviderSettings]:
    """Every provider's settings for the admin: secrets masked, plus sources."""
    shown_all = []
    for spec in providers:
        values, sources = effective_values(session, settings, spec)
        shown: dict[str, Any] = {}
        for field, is_secret in spec.fields.items():
            value = values[field]
            if is_secret:
                value = (
                    [mask_secret(str(v)) for v in value]
                    if isinstance(value, list)
                    else (mask_secret(str(value)) if value else "")
                )
            shown[field] = value
        shown_all.append(ProviderSettings(spec.name, shown, sources))
    return shown_all


# --- writing -----------------------------------------------------------------------------


class SettingsInvalid(Exception):
    def __init__(self, errors: dict[str, str]):
        super().__init__("invalid payment settings")
        self.errors = errors


def validate_update(providers: PaymentProviders, data: Any) -> dict[str, dict[str, Any]]:
    """Check a partial update body; raise SettingsInvalid with one message per field."""
    errors: dict[str, str] = {}
    if not isinstance(data, dict):
        raise SettingsInvalid({"body": "must be an object"})
    result: dict[str, dict[str, Any]] = {}
    for name, fields in data.items():
        spec = providers.get(name)
        if spec is None:
            errors[name] = f"unknown provider; known: {', '.join(providers.names()) or 'none'}"
            continue
        if not isinstance(fields, dict):
            errors[name] = "must be an object"
            continue
        result[name] = {}
        for field, value in fields.items():
            key = f"{name}.{field}"
            if field not in spec.fields:
                errors[key] = f"unknown field; known: {', '.join(spec.fields)}"
                continue
            message = _check_value(spec, field, value)
            if message:
                errors[key] = message
                continue
            result[name][field] = value
    if errors:
        raise SettingsInvalid(errors)
    return result


def _check_value(spec: ProviderSpec, field: str, value: Any) -> str | None:
    if value is None:
        return None  # remove the saved value: the ini default applies again
    if field in spec.list_fields:
        if not isinstance(value, list):
            return "must be an array of strings or null"
        if len(value) > MAX_LIST_ITEMS:
            return f"at most {MAX_LIST_ITEMS} items"
        for item in value:
            if not isinstance(item, str) or not item.strip():
                return "every item must be a non-empty string"
            if len(item) > MAX_VALUE_LENGTH or not item.isprintable():
                return f"items must be printable and at most {MAX_VALUE_LENGTH} characters"
    else:
        if not isinstance(value, str):
            return "must be a string or null"
        if len(value) > MAX_VALUE_LENGTH or not value.isprintable():
            return f"must be printable and at most {MAX_VALUE_LENGTH} characters"
    validator = spec.validators.get(field)
    if validator is not None:
        try:
            validator(value)
        except ValueError as exc:
            return str(exc)
    return None


def webhook_field(spec: ProviderSpec) -> str | None:
    """The field a provider's deliveries are verified with (its signing secrets, or the
    webhook id): the first settings field whose name starts with ``webhook``."""
    return next((field for field in spec.fields if field.startswith("webhook")), None)


def rotation_update(
    session: Session,
    settings: Mapping[str, Any],
    providers: PaymentProviders,
    name: str,
    value: str,
) -> dict[str, dict[str, Any]]:
    """The validated update that rotates ``name``'s webhook field to ``value``.

    A list field (the card provider's signing secrets) becomes ``[new, current]``: the
    current secret is kept as the previous one, still verified, as the settings PUT
    ``{"webhookSecrets": ["whsec_new", "whsec_previous"]}`` would save it, until the
    provider has stopped signing with it. A single value is replaced. Raises
    SettingsInvalid (validate_update's checks) with the messages under ``value``.
    """
    spec = providers.get(name)
    field = webhook_field(spec) if spec is not None else None
    if field is None:
        raise SettingsInvalid({"value": "this provider has no webhook setting"})
    new: Any = value.strip()
    if field in spec.list_fields:
        current, _ = effective_values(session, settings, spec)
        kept = [item for item in current[field] if item != new]
        new = [new, *kept[:1]]
    try:
        return validate_update(providers, {name: {field: new}})
    except SettingsInvalid as exc:
        raise SettingsInvalid({"value": "; ".join(exc.errors.values())}) from None


def save_settings(
    session: Session,
    settings: Mapping[str, Any],
    providers: PaymentProviders,
    update: dict[str, dict[str, Any]],
    admin_id: int | None,
) -> None:
    """Apply a validated partial update: null deletes the saved value, anything else
    replaces it (encrypted when the field is a secret)."""
    secret = settings["cmsshop.secret"]
    for name, fields in update.items():
        spec = providers.get(name)
        for field, value in fields.items():
            row = session.scalar(
                select(PaymentSetting).where(
                    PaymentSetting.provider == name, PaymentSetting.field == field
                )
            )
            if value is None:
                if row is not None:
                    session.delete(row)
                continue
            if isinstance(value, list):
                value = [item.strip() for item in value]
            elif isinstance(value, str):
                value = value.strip()
            encrypted = spec.fields[field]
            stored = encrypt_value(secret, value) if encrypted else json.dumps(value)
            if row is None:
                row = PaymentSetting(provider=name, field=field)
                session.add(row)
            row.value = stored
            row.encrypted = encrypted
            row.updated_at = utcnow()
            row.updated_by = admin_id
    session.flush()


def form_update(
    providers: PaymentProviders,
    name: str,
    fields: tuple[str, ...],
    typed: Mapping[str, str],
    remove: set[str],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """The validated update of the console's connect form of ``name``.

    For each of ``fields``: an empty entry keeps the stored value, a field in ``remove``
    deletes it (the ini default applies again), anything else replaces it (a list field
    takes whitespace-separated items). ``extra`` adds values set otherwise (the PayPal
    environment's API address). Raises SettingsInvalid with one message per form field.
    """
    spec = providers.get(name)
    if spec is None:
        raise SettingsInvalid({"provider": "unknown provider"})
    update: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in fields:
        value = str(typed.get(field) or "").strip()
        if field in remove:
            if value:
                errors[field] = "enter a new value or remove the saved one, not both"
            else:
                update[field] = None
        elif value:
            update[field] = value.split() if field in spec.list_fields else value
    update.update(extra or {})
    if not errors:
        try:
            return validate_update(providers, {name: update})
        except SettingsInvalid as exc:
            errors = {key.partition(".")[2] or key: message for key, message in exc.errors.items()}
    raise SettingsInvalid(errors)
