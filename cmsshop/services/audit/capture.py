"""Admin changes recorded at the ORM level: no route, form or command can forget them.

Whoever makes a change as an admin (a view with the ADMIN permission and an unsafe
method, a ``cmsshop-admin`` command) sets an :class:`AuditContext` on the session
first (:func:`set_context`). While one is set, :func:`record_flushed_changes` (a
session ``after_flush`` listener) writes one audit entry per inserted, updated or
deleted row of the audited models, in the flush's own transaction: a change that rolls
back takes its entries with it. Without a context the listener returns at once, so the
hot paths (licence validation, provider webhooks, fulfilment) pay nothing.

The context is also held in a context variable while the admin's view or command runs
(:func:`acting_as`), so changes it makes in sessions of their own (a payment event
reprocessed in its own transactions) are recorded as the admin's too, each in the
transaction that commits it.

The entries are written with a Core insert on the flush's connection: no ORM object is
added during the flush, so nothing recurses and the session's state is untouched.
Entries are never edited or deleted: :func:`refuse_entry_changes` (``before_flush``)
refuses a dirty or deleted :class:`AuditEntry`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime as dt
import getpass
import json
from typing import Any

from sqlalchemy import ColumnElement, event, insert, inspect, select
from sqlalchemy.orm import Session

from cmsshop import models
from cmsshop.models import AuditEntry
from cmsshop.util import utcnow

CONTEXT_KEY = "cmsshop.audit_context"
ACTIVE: contextvars.ContextVar[AuditContext | None] = contextvars.ContextVar(
    "cmsshop_audit_context", default=None
)

# Mapped class -> (object_type, the attribute naming the row in the console and in the
# entries' object_id). A natural key where the console addresses the row by one.
AUDITED: dict[type, tuple[str, str]] = {
    models.Product: ("product", "slug"),
    models.ProductPrice: ("product_price", "id"),
    models.ProductImage: ("product_image", "id"),
    models.Release: ("release", "id"),
    models.Article: ("article", "slug"),
    models.Currency: ("currency", "code"),
    models.Coupon: ("coupon", "code"),
    models.CouponAmount: ("coupon_amount", "id"),
    models.CouponProduct: ("coupon_product", "id"),
    models.Order: ("order", "number"),
    models.SubscriptionPlan: ("subscription_plan", "id"),
    models.Subscription: ("subscription", "id"),
    models.SubscriptionPeriod: ("subscription_period", "id"),
    models.OrderNote: ("order_note", "id"),
    models.Refund: ("refund", "id"),
    models.CreditNote: ("credit_note", "id"),
    models.License: ("license", "key"),
    models.Activation: ("activation", "id"),
    models.LicenseChange: ("license_change", "id"),
    models.SupportTicket: ("ticket", "id"),
    models.TicketMessage: ("ticket_message", "id"),
    models.ShopSetting: ("shop_setting", "key"),
    models.ShopFile: ("shop_file", "id"),
    models.PaymentSetting: ("payment_setting", "id"),
    models.LegalDocument: ("legal_document", "id"),
    models.User: ("user", "id"),
    models.OutboxMessage: ("outbox_message", "id"),
    models.PaymentEvent: ("payment_event", "id"),
    models.Entitlement: ("entitlement", "id"),
    models.ApiToken: ("api_token", "id"),
    models.WebhookEndpoint: ("webhook_endpoint", "id"),
}

# Columns whose change alone is bookkeeping, not an admin's change.
IGNORED_COLUMNS = frozenset({"updated_at", "last_used_at", "last_used_ip"})
REDACTED = "[redacted]"
SECRET_COLUMNS = frozenset(
    {"password_hash", "token_hash", "secret_encrypted", "previous_secret_encrypted"}
)
MAX_TEXT = 120
MAX_KEYS = 20
VIA_LENGTH = 120


@dataclasses.dataclass(frozen=True)
class AuditContext:
    """Who is changing things, through which channel and route or command."""

    actor: str  # "user:<id>", "token:<id>", "cli:<os user>"
    channel: str  # "console", "api", "cli"
    via: str | None = None  # "PATCH /api/admin/products/{slug}", "cmsshop-admin create-user"
    ip: str | None = None
    actor_id: int | None = None
    actor_token_id: int | None = None


def request_context(request) -> AuditContext:
    """The context of an admin request: its user, its API token if any, its route."""
    user, token = request.user, request.api_token
    route = request.matched_route
    path = route.pattern if route is not None else request.path_info
    if token is not None:
        actor = f"token:{token.id}"
    else:
        actor = f"user:{user.id}" if user is not None else "anonymous"
    return AuditContext(
        actor=actor,
        channel="api" if request.path_info.startswith("/api/") else "console",
        via=f"{request.method} {path}"[:VIA_LENGTH],
        ip=request.client_addr,
        actor_id=user.id if user is not None else None,
        actor_token_id=token.id if token is not None else None,
    )


def cli_context(command: str) -> AuditContext:
    """The context of a ``cmsshop-admin`` command run by the operating-system user."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a bare container)
        who = "unknown"
    return AuditContext(actor=f"cli:{who}", channel="cli", via=f"cmsshop-admin {command}")


def set_context(session: Session, context: AuditContext) -> None:
    """Record the session's changes from now on as ``context``'s. Nothing is flushed
    here: on SQLite a write now, before the view takes the write lock, could conflict
    with the read snapshot. Bookkeeping already pending (a token's last use) is in
    IGNORED_COLUMNS, so it makes no entry when it is flushed later."""
    session.info[CONTEXT_KEY] = context


def current_context(session: Session) -> AuditContext | None:
    """The session's own context, else the one of the view or command running."""
    return session.info.get(CONTEXT_KEY) or ACTIVE.get()


@contextlib.contextmanager
def acting_as(context: AuditContext):
    """Changes made in any session while the block runs are ``context``'s."""
    token = ACTIVE.set(context)
    try:
        yield context
    finally:
        ACTIVE.reset(token)


def _is_secret(name: str) -> bool:
    return name in SECRET_COLUMNS or "secret" in name or "password" in name or "token_hash" in name


def _shown(value: Any) -> Any:
    """A value as an entry shows it: short, JSON-safe, never raw bytes."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="seconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value) if not isinstance(value, dict | list) else _json_text(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _json_text(value) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def _value(obj, name: str, value: Any) -> Any:
    if _is_secret(name):
        return REDACTED if value is not None else None
    if isinstance(obj, models.PaymentSetting) and name == "value" and obj.encrypted:
        return REDACTED
    return _shown(value)


def _bounded(values: dict[str, Any]) -> dict[str, Any]:
    if len(values) <= MAX_KEYS:
        return values
    kept = dict(list(values.items())[:MAX_KEYS])
    kept["…"] = f"{len(values) - MAX_KEYS} more"
    return kept


def _columns(obj):
    return inspect(obj).mapper.column_attrs


def _created(obj) -> dict:
    loaded = inspect(obj).dict
    after = {
        attr.key: _value(obj, attr.key, loaded[attr.key])
        for attr in _columns(obj)
        if attr.key in loaded and attr.key not in IGNORED_COLUMNS and loaded[attr.key] is not None
    }
    return {"after": _bounded(after)}


def _deleted(obj) -> dict:
    loaded = inspect(obj).dict
    before = {
        attr.key: _value(obj, attr.key, loaded[attr.key])
        for attr in _columns(obj)
        if attr.key in loaded and attr.key not in IGNORED_COLUMNS
    }
    return {"before": _bounded(before)}


def _updated(obj) -> dict | None:
    state = inspect(obj)
    before, after = {}, {}
    for attr in _columns(obj):
        if attr.key in IGNORED_COLUMNS:
            continue
        history = state.attrs[attr.key].history
        if not history.added and not history.deleted:
            continue
        old = history.deleted[0] if history.deleted else None
        new = history.added[0] if history.added else None
        if old == new and history.deleted:
            continue
        before[attr.key] = _value(obj, attr.key, old)
        after[attr.key] = _value(obj, attr.key, new)
    if not after:
        return None
    return {"before": _bounded(before), "after": _bounded(after)}


def _admin_delivery_entries(context: AuditContext, session: Session) -> list[dict]:
    """Outgoing webhook events and deliveries are the system's outbox and not recorded
    as rows, but two of them only an admin starts: a test event sent to an endpoint, and
    a delivery queued again. Each is an entry about its endpoint."""
    rows = []
    for obj in session.new:
        if isinstance(obj, models.WebhookEvent) and obj.type == models.TEST_EVENT_TYPE:
            endpoint_id = (obj.data or {}).get("endpointId")
            if endpoint_id is not None:
                summary = {"after": {"event": obj.public_id}}
                rows.append(
                    _entry_row(context, "webhook_endpoint", "test_sent", endpoint_id, summary)
                )
    for obj in session.dirty:
        if not isinstance(obj, models.WebhookDelivery):
            continue
        history = inspect(obj).attrs["status"].history
        if history.added == ["pending"] and history.deleted and history.deleted[0] != "pending":
            summary = {
                "before": {"delivery": obj.id, "status": history.deleted[0]},
                "after": {"delivery": obj.id, "status": "pending"},
            }
            rows.append(
                _entry_row(context, "webhook_endpoint", "redelivered", obj.endpoint_id, summary)
            )
    return rows


def _object_id(obj, key_attr: str) -> str:
    value = inspect(obj).dict.get(key_attr)
    if value is None:
        value = inspect(obj).identity[0] if inspect(obj).identity else "?"
    return str(value)[:64]


def record_flushed_changes(session: Session, flush_context) -> None:
    """``after_flush``: one entry per audited row this flush inserted, updated or
    deleted, when the session carries an :class:`AuditContext`."""
    context = session.info.get(CONTEXT_KEY) or ACTIVE.get()
    if context is None:
        return
    rows = []
    for objects, action, describe in (
        (session.new, "created", _created),
        (session.dirty, "updated", _updated),
        (session.deleted, "deleted", _deleted),
    ):
        for obj in objects:
            audited = AUDITED.get(type(obj))
            if audited is None:
                continue
            summary = describe(obj)
            if summary is None:
                continue
            object_type, key_attr = audited
            rows.append(
                _entry_row(context, object_type, action, _object_id(obj, key_attr), summary)
            )
    rows.extend(_admin_delivery_entries(context, session))
    if rows:
        session.connection().execute(insert(AuditEntry.__table__), rows)


BULK_ROWS = 1000


def _entry_row(context: AuditContext, object_type: str, action: str, object_id, summary) -> dict:
    return {
        "created_at": utcnow(),
        "actor_id": context.actor_id,
        "actor": context.actor,
        "actor_token_id": context.actor_token_id,
        "channel": context.channel,
        "via": context.via,
        "action": f"{object_type}.{action}",
        "object_type": object_type,
        "object_id": str(object_id)[:64],
        "summary": summary,
        "ip": context.ip,
    }


def _bulk_values(statement) -> dict[str, Any]:
    """An ORM UPDATE's SET clause as column name -> value (an expression, such as
    ``used + 1``, is shown as ``(computed)``)."""
    values = {}
    for key, value in (getattr(statement, "_values", None) or {}).items():
        name = getattr(key, "key", None) or getattr(key, "name", None) or str(key)
        literal = getattr(value, "value", value) if hasattr(value, "value") else value
        values[name] = "(computed)" if isinstance(literal, ColumnElement) else literal
    return values


def record_bulk_changes(orm_state):
    """``do_orm_execute``: an ORM bulk UPDATE or DELETE of audited rows (``update(Model)
    .where(...)``) under a context records one entry per row it touches, read just before
    it runs in the same transaction."""
    if not (orm_state.is_update or orm_state.is_delete) or not orm_state.is_orm_statement:
        return None
    session = orm_state.session
    context = session.info.get(CONTEXT_KEY) or ACTIVE.get()
    if context is None:
        return None
    mapper = orm_state.bind_mapper
    audited = AUDITED.get(mapper.class_) if mapper is not None else None
    if audited is None:
        return None
    object_type, key_attr = audited
    statement = orm_state.statement
    table = mapper.local_table
    key_column = mapper.columns[key_attr]
    if orm_state.is_update:
        changed = {
            name: value
            for name, value in _bulk_values(statement).items()
            if name not in IGNORED_COLUMNS and name in mapper.columns
        }
        columns = [mapper.columns[name] for name in changed]
    else:
        changed = {}
        columns = [c for c in table.columns if c.key not in IGNORED_COLUMNS]
    query = select(key_column.label("_key"), *columns).select_from(table)
    if statement.whereclause is not None:
        query = query.where(statement.whereclause)
    before_rows = session.connection().execute(query.limit(BULK_ROWS)).mappings().all()
    result = orm_state.invoke_statement()
    rows = []
    for row in before_rows:
        if orm_state.is_update:
            before = {name: _value_of(object_type, name, row[name]) for name in changed}
            after = {name: _value_of(object_type, name, value) for name, value in changed.items()}
            differing = [name for name in changed if before[name] != after[name]]
            if not differing:
                continue
            summary = {
                "before": _bounded({name: before[name] for name in differing}),
                "after": _bounded({name: after[name] for name in differing}),
            }
            rows.append(_entry_row(context, object_type, "updated", row["_key"], summary))
        else:
            before = {c.key: _value_of(object_type, c.key, row[c.key]) for c in columns}
            summary = {"before": _bounded(before)}
            rows.append(_entry_row(context, object_type, "deleted", row["_key"], summary))
    if rows:
        session.connection().execute(insert(AuditEntry.__table__), rows)
    return result


def _value_of(object_type: str, name: str, value: Any) -> Any:
    if _is_secret(name) or (object_type == "payment_setting" and name == "value"):
        return REDACTED if value is not None else None
    return _shown(value)


class AuditEntryImmutable(RuntimeError):
    """Something tried to change or delete an audit entry through the ORM."""


def refuse_entry_changes(session: Session, flush_context, instances) -> None:
    """``before_flush``: audit entries are written once, never edited or deleted."""
    for obj in session.deleted:
        if isinstance(obj, AuditEntry):
            raise AuditEntryImmutable("audit entries cannot be deleted")
    for obj in session.dirty:
        if isinstance(obj, AuditEntry) and session.is_modified(obj, include_collections=False):
            raise AuditEntryImmutable("audit entries cannot be edited")


def fill_from_context(session: Session, entry: AuditEntry) -> None:
    """Give an explicitly recorded entry the channel, route and token of the session's
    context when its caller did not say."""
    context = session.info.get(CONTEXT_KEY)
    if context is None:
        return
    if entry.channel is None:
        entry.channel = context.channel
    if entry.via is None:
        entry.via = context.via
    if entry.actor_token_id is None and entry.actor_id == context.actor_id:
        # The admin acting through one of their API tokens: named as the token, as
        # the captured entries of the same request are.
        entry.actor_token_id = context.actor_token_id
        if context.actor_token_id is not None:
            entry.actor = context.actor
    if entry.ip is None:
        entry.ip = context.ip


def register(target) -> None:
    """Attach the listeners to a sessionmaker (or Session class)."""
    event.listen(target, "before_flush", refuse_entry_changes)
    event.listen(target, "after_flush", record_flushed_changes)
    event.listen(target, "do_orm_execute", record_bulk_changes)
