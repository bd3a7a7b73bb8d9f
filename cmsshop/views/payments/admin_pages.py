"""Admin pages of the payment area (/admin/payments): provider settings with secrets
masked and the webhook secret rotation, the provider event log, one event and its
reprocessing -- the services of the JSON routes in cmsshop.views.payments.admin_api."""

from __future__ import annotations

import json

import colander
from pyramid.view import view_config

from cmsshop.errors import NotFound
from cmsshop.models import EVENT_STATUSES
from cmsshop.security import ADMIN
from cmsshop.services.payments import connect
from cmsshop.services.payments import settings as ps
from cmsshop.services.payments.events import errors as pe
from cmsshop.services.payments.events import reading, reprocess
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.views.payments.admin_api import EventFilterSchema, _event_id
from cmsshop.views.shared.forms import FormInvalid, posted_fields, read_form, see_other
from cmsshop.views.shared.json import StrictString, query_value, read_page_request, validate
from cmsshop.web import error, info

NOTICES = {
    "webhook_rotated": "The new webhook setting is saved.",
    "provider_saved": "The provider settings are saved.",
    "event_processed": "Reprocessed: the event is processed.",
    "event_duplicate": info("Reprocessed: the event had been processed already (duplicate)."),
    "event_ignored": info("Reprocessed: the event needs no action (ignored)."),
    "event_needs_review": info("Reprocessed: the order needs a review (see the order)."),
    "event_cannot_reprocess": error(
        "Not reprocessed: the event is final already or still fails verification "
        "(see the last error)."
    ),
    "event_not_configured": error("Not reprocessed: the provider's webhook is not configured."),
    "event_reprocess_failed": error("Reprocessing failed again; the last error says why."),
}
OUTCOME_NOTICES = {
    "processed": "event_processed",
    "duplicate": "event_duplicate",
    "ignored": "event_ignored",
    "needs_review": "event_needs_review",
}


class RotateSchema(colander.MappingSchema):
    value = colander.SchemaNode(
        StrictString(), validator=colander.Length(min=1, max=ps.MAX_VALUE_LENGTH)
    )


SOURCES = {"admin": "Saved here", "ini": "Server configuration", "unset": "Not set"}


def _settings_page(
    request,
    errors: dict | None = None,
    typed: dict | None = None,
    *,
    connect_errors: dict | None = None,
    checked: connect.ConnectionCheck | None = None,
) -> dict:
    """The page's data. ``errors``: rotation errors by provider; ``connect_errors``:
    {provider: {field: message}} of a refused connect form; ``checked``: the outcome of
    Test connection. No typed secret is ever handed back to the page."""
    providers = request.find_service(PaymentProviders)
    settings = request.registry.settings
    shown = ps.masked_settings(request.db, settings, providers)
    connect_errors = connect_errors or {}
    rows = []
    for item in shown:
        spec = providers.get(item.name)
        fields = [
            {
                "name": field,
                "label": connect.field_label(item.name, field),
                "secret": is_secret,
                "value": item.values[field],
                "source": item.sources[field],
                "source_label": SOURCES.get(item.sources[field], item.sources[field]),
                "hint": connect.HINTS.get((item.name, field)),
                "is_list": field in spec.list_fields,
            }
            for field, is_secret in spec.fields.items()
        ]
        by_name = {field["name"]: field for field in fields}
        form_fields = [by_name[f] for f in connect.FORM_FIELDS.get(item.name, ()) if f in by_name]
        api_base = item.values.get("apiBase") or ""
        rows.append(
            {
                "name": item.name,
                "label": connect.seller_name(item.name),
                "fields": fields,
                "form_fields": form_fields,
                "form_errors": connect_errors.get(item.name, {}),
                "mode": connect.paypal_mode(api_base) if item.name == connect.WALLET else None,
                "api_base": api_base,
                "webhook_url": connect.webhook_url(settings, item.name),
                "webhook_events": connect.WEBHOOK_EVENTS.get(item.name, ()),
                "checked": checked
                if checked is not None and checked.provider == item.name
                else None,
                "webhook_field": ps.webhook_field(spec),
                "webhook_label": connect.field_label(item.name, ps.webhook_field(spec) or ""),
                "webhook_is_list": ps.webhook_field(spec) in spec.list_fields,
                "webhook_is_secret": spec.fields.get(ps.webhook_field(spec) or "", False),
            }
        )
    return {
        "admin_section": "payments",
        "providers": rows,
        "rotate_errors": errors or {},
        "rotate_typed": typed or {},
    }


@view_config(
    route_name="pages.admin_payments",
    request_method="GET",
    renderer="admin/payments/settings.html",
    permission=ADMIN,
)
def payments_page(request):
    return _settings_page(request)


@view_config(
    route_name="pages.admin_payments_rotate",
    request_method="POST",
    renderer="admin/payments/settings.html",
    permission=ADMIN,
)
def rotate_submit(request):
    providers = request.find_service(PaymentProviders)
    name = request.matchdict["provider"]
    if providers.get(name) is None:
        raise NotFound("No payment provider has this name.")
    try:
        value = read_form(request, RotateSchema())["value"]
        update = ps.rotation_update(request.db, request.registry.settings, providers, name, value)
    except FormInvalid as exc:
        request.response.status = 422
        return _settings_page(request, {name: exc.errors.get("value", "is invalid")})
    except ps.SettingsInvalid as exc:
        request.response.status = 422
        # A refused secret is not shown back in the page (only what makes it invalid).
        return _settings_page(request, {name: exc.errors["value"]})
    ps.save_settings(request.db, request.registry.settings, providers, update, request.user.id)
    return see_other(request, "/admin/payments", notice="webhook_rotated")


def _provider_name(request) -> str:
    name = request.matchdict["provider"]
    if request.find_service(PaymentProviders).get(name) is None:
        raise NotFound("No payment provider has this name.")
    return name


@view_config(
    route_name="pages.admin_payments_connect",
    request_method="POST",
    renderer="admin/payments/settings.html",
    permission=ADMIN,
)
def connect_submit(request):
    """Save the connect form: an empty field keeps the stored value, a ticked "remove"
    deletes it; a refusal (422) changes nothing and shows no typed secret back."""
    providers = request.find_service(PaymentProviders)
    name = _provider_name(request)
    fields = connect.FORM_FIELDS.get(name, ())
    typed = posted_fields(request, fields)
    remove = {value for value in request.POST.getall("remove") if value in fields}
    extra = {}
    environment = posted_fields(request, ["environment"]).get("environment", "")
    errors: dict[str, str] = {}
    if name == connect.WALLET and environment:
        if environment in connect.MODE_BASES:
            extra["apiBase"] = connect.MODE_BASES[environment]
        elif environment != "keep":
            errors["environment"] = "choose live or sandbox"
    try:
        if errors:
            raise ps.SettingsInvalid(errors)
        update = ps.form_update(providers, name, fields, typed, remove, extra)
    except ps.SettingsInvalid as exc:
        request.response.status = 422
        found = {("environment" if key == "apiBase" else key): m for key, m in exc.errors.items()}
        return _settings_page(request, connect_errors={name: found})
    ps.save_settings(request.db, request.registry.settings, providers, update, request.user.id)
    return see_other(request, f"/admin/payments#provider-{name}", notice="provider_saved")


@view_config(
    route_name="pages.admin_payments_test",
    request_method="POST",
    renderer="admin/payments/settings.html",
    permission=ADMIN,
)
def test_submit(request):
    """Test connection with the stored credentials; the outcome is shown on the page."""
    name = _provider_name(request)
    spec = request.find_service(PaymentProviders).get(name)
    config = ps.provider_config(request.registry, spec, request.db)
    return _settings_page(request, checked=connect.check_connection(name, config))


# --- the event log ----------------------------------------------------------------------------


@view_config(
    route_name="pages.admin_payment_events",
    request_method="GET",
    renderer="admin/payments/events.html",
    permission=ADMIN,
)
def events_page(request):
    paging = read_page_request(request)
    typed = {}
    for name in ("provider", "status", "order"):
        value = query_value(request, name)
        if value not in (None, ""):
            typed[name] = value
    filters = validate(EventFilterSchema(), typed)
    page = reading.list_events(
        request.db,
        paging,
        provider=filters["provider"],
        status=filters["status"],
        order_number=filters["order"],
    )
    providers = request.find_service(PaymentProviders)
    return {
        "admin_section": "payments",
        "page": page,
        "filters": typed,
        "statuses": EVENT_STATUSES,
        "provider_names": list(providers.names()),
    }


def pretty_payload(payload: str) -> str:
    """The stored payload indented, or as stored when it is not JSON."""
    try:
        return json.dumps(json.loads(payload), indent=2, ensure_ascii=False, sort_keys=True)
    except (ValueError, RecursionError):
        return payload


@view_config(
    route_name="pages.admin_payment_event",
    request_method="GET",
    renderer="admin/payments/event.html",
    permission=ADMIN,
)
def event_page(request):
    row = reading.find_event(request.db, _event_id(request))
    if row is None:
        raise NotFound("No payment event has this id.", code="payment_event_not_found")
    return {
        "admin_section": "payments",
        "event": row,
        "payload": pretty_payload(row.payload),
        "headers": sorted(reading.stored_headers(row).items()),
        "can_reprocess": row.status not in reprocess.FINAL_STATUSES,
    }


@view_config(
    route_name="pages.admin_payment_event_reprocess",
    request_method="POST",
    permission=ADMIN,
)
def reprocess_submit(request):
    """The JSON route's service (transactions of its own, so the outcome is recorded
    whatever this request does), then back to the event with the outcome."""
    row_id = _event_id(request)
    try:
        result = reprocess.reprocess_event(
            request.registry, request.find_service(PaymentProviders), row_id
        )
    except pe.EventNotFound:
        raise NotFound("No payment event has this id.", code="payment_event_not_found") from None
    except pe.CannotReprocess:
        notice = "event_cannot_reprocess"
    except pe.WebhookNotConfigured:
        notice = "event_not_configured"
    except pe.DeliveryError:
        notice = "event_reprocess_failed"
    else:
        row_id = result.event_log_id or row_id
        notice = OUTCOME_NOTICES.get(result.status, "event_processed")
    return see_other(request, f"/admin/payments/events/{row_id}", notice=notice)
