"""The console's webhooks pages: the endpoints with their state and last delivery, the
new and edit forms, one endpoint's page (its actions and delivery log). A signing
secret is shown on the answer to the post that made it (create, rotate), once: never
stored in clear, so never redirected to."""

from __future__ import annotations

import colander
from pyramid.renderers import render_to_response
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, ValidationFailed
from cmsshop.models import WEBHOOK_EVENT_TYPES
from cmsshop.security import ADMIN
from cmsshop.services.webhooks import endpoints
from cmsshop.views.shared.confirm import confirm_page, confirmed
from cmsshop.views.shared.forms import FormInvalid, field_errors, posted_value, see_other
from cmsshop.views.shared.json import parse_path_id, read_page_request
from cmsshop.views.shared.schema import text_node
from cmsshop.views.webhooks.admin_api import MAX_DESCRIPTION, MAX_URL, secret_answer

NOTICES = {
    "webhook_updated": "The webhook endpoint is saved.",
    "webhook_enabled": "The webhook endpoint is enabled: new events are delivered to it.",
    "webhook_disabled": "The webhook endpoint is disabled: nothing is delivered to it.",
    "webhook_deleted": "The webhook endpoint and its delivery log are deleted.",
    "webhook_test_sent": "A test event is queued: it appears in the delivery log below.",
    "webhook_redelivered": "The delivery is queued again: the worker sends it shortly.",
    "webhook_redeliver_disabled": "The endpoint is disabled: enable it to redeliver.",
}
PATH = "/admin/webhooks"
FORM = "webhooks/admin/form.html"
SECRET = "webhooks/admin/secret.html"
EVENT_DESCRIPTIONS = {
    "order.paid": "An order is paid (and delivered).",
    "order.refunded": "An order is refunded in full (or lost to a chargeback).",
    "license.created": "A licence is issued.",
    "license.revoked": "A licence is revoked (by an admin or a refund).",
    "license.renewed": "A licence is renewed (its expiry moves).",
    "license.upgraded": "A licence is upgraded to another product.",
    "activation.created": "An installation activates a licence.",
    "activation.deleted": "An installation's activation ends (a seat is freed).",
    "ticket.created": "A customer opens a support ticket.",
}
OVERLAP_CHOICES = [
    ("24", "24 hours (recommended)"),
    ("0", "None: the current secret stops at once"),
    ("1", "1 hour"),
    ("72", "3 days"),
    ("168", "7 days"),
]


class ConsoleEndpointSchema(colander.MappingSchema):
    url = text_node(MAX_URL, min_length=1)
    description = text_node(MAX_DESCRIPTION, missing="")


def endpoint_of(request):
    return endpoints.get_endpoint(request.db, parse_path_id(request.matchdict["id"]))


def form_values(request, *, form, errors, endpoint=None, status=200) -> dict:
    request.response.status = status
    return {
        "endpoint": endpoint,
        "form": form,
        "errors": errors,
        "event_types": [(name, EVENT_DESCRIPTIONS[name]) for name in WEBHOOK_EVENT_TYPES],
    }


def read_endpoint_form(request) -> dict:
    typed = {
        "url": posted_value(request, "url"),
        "description": posted_value(request, "description"),
        "event_types": [v for v in request.POST.getall("event_types") if isinstance(v, str)],
        "enabled": bool(posted_value(request, "enabled")),
    }
    errors = {}
    data = {}
    try:
        data = ConsoleEndpointSchema().deserialize(
            {"url": typed["url"], "description": typed["description"]}
        )
    except colander.Invalid as exc:
        errors.update({key: value for key, value in exc.asdict().items()})
    try:
        data["event_types"] = endpoints.check_event_types(typed["event_types"], "event_types")
    except ValidationFailed as exc:
        errors.update(field_errors(exc))
    if "url" in data:
        try:
            data["url"] = endpoints.check_url(request.registry.settings, data["url"])
        except ValidationFailed as exc:
            errors.update(field_errors(exc))
    if errors:
        raise FormInvalid(errors, typed)
    data["enabled"] = typed["enabled"]
    return data


@view_config(route_name="pages.admin_webhooks", request_method="GET",
             renderer="webhooks/admin/index.html", permission=ADMIN)  # fmt: skip
def index_page(request):
    found = endpoints.list_endpoints(request.db)
    return {
        "endpoints": found,
        "last": endpoints.last_deliveries(request.db, [e.id for e in found]),
    }


@view_config(route_name="pages.admin_webhook_new", request_method="GET", renderer=FORM,
             permission=ADMIN)  # fmt: skip
def new_page(request):
    return form_values(
        request,
        form={"url": "", "description": "", "event_types": [], "enabled": True},
        errors={},
    )


@view_config(route_name="pages.admin_webhook_new", request_method="POST", renderer=SECRET,
             permission=ADMIN)  # fmt: skip
def create_submit(request):
    try:
        data = read_endpoint_form(request)
    except FormInvalid as exc:
        request.override_renderer = FORM
        return form_values(request, form=exc.form, errors=exc.errors, status=422)
    created = endpoints.create_endpoint(
        request.db,
        request.registry.settings,
        url=data["url"],
        event_types=data["event_types"],
        description=data["description"],
        enabled=data["enabled"],
        created_by_id=request.user.id,
    )
    secret_answer(request)
    return {"endpoint": created.endpoint, "secret": created.secret, "rotated": False}


@view_config(route_name="pages.admin_webhook", request_method="GET",
             renderer="webhooks/admin/endpoint.html", permission=ADMIN)  # fmt: skip
def endpoint_page(request):
    endpoint = endpoint_of(request)
    try:
        paging = read_page_request(request)
    except ApiError:
        raise NotFound("No such page of deliveries.") from None
    page = endpoints.list_deliveries(request.db, endpoint, paging)
    return {
        "endpoint": endpoint,
        "secret_hint": endpoints.secret_hint(request.registry.settings, endpoint),
        "page": page,
        "attempts": endpoints.attempts_of(request.db, [row.id for row in page.items]),
        "overlaps": OVERLAP_CHOICES,
        "page_url": lambda page: f"{PATH}/{endpoint.id}?page={page}",
    }


@view_config(route_name="pages.admin_webhook_edit", request_method="GET", renderer=FORM,
             permission=ADMIN)  # fmt: skip
def edit_page(request):
    endpoint = endpoint_of(request)
    form = {
        "url": endpoint.url,
        "description": endpoint.description,
        "event_types": list(endpoint.event_types or []),
        "enabled": endpoint.enabled,
    }
    return form_values(request, form=form, errors={}, endpoint=endpoint)


@view_config(route_name="pages.admin_webhook_edit", request_method="POST", renderer=FORM,
             permission=ADMIN)  # fmt: skip
def edit_submit(request):
    endpoint = endpoint_of(request)
    try:
        data = read_endpoint_form(request)
    except FormInvalid as exc:
        return form_values(request, form=exc.form, errors=exc.errors, endpoint=endpoint, status=422)
    endpoints.update_endpoint(request.db, request.registry.settings, endpoint, data)
    return see_other(request, f"{PATH}/{endpoint.id}", notice="webhook_updated")


@view_config(route_name="pages.admin_webhook_action", request_method="POST", permission=ADMIN)
def action_submit(request):
    endpoint = endpoint_of(request)
    action = request.matchdict["action"]
    here = f"{PATH}/{endpoint.id}"
    if action == "enable":
        endpoints.set_enabled(endpoint, True)
        return see_other(request, here, notice="webhook_enabled")
    if action == "disable":
        endpoints.set_enabled(endpoint, False)
        return see_other(request, here, notice="webhook_disabled")
    if action == "test":
        endpoints.send_test_event(request.db, endpoint)
        return see_other(request, here, notice="webhook_test_sent")
    if action == "rotate":
        return rotate_submit(request, endpoint)
    if action == "delete":
        if not confirmed(request):
            return confirm_page(
                request,
                title=f"Delete the webhook endpoint {endpoint.url}?",
                consequences=[
                    "Nothing more is sent to it, including deliveries still being retried.",
                    "Its delivery log is deleted with it.",
                ],
                action=f"{here}/delete",
                button="Delete the endpoint",
                cancel=here,
                section="webhooks",
            )
        endpoints.delete_endpoint(request.db, endpoint)
        return see_other(request, PATH, notice="webhook_deleted")
    raise NotFound("No such action.")


def rotate_submit(request, endpoint):
    raw = posted_value(request, "overlap_hours") or str(endpoints.DEFAULT_OVERLAP_HOURS)
    hours = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 5 else -1
    try:
        secret = endpoints.rotate_secret(request.db, request.registry.settings, endpoint, hours)
    except ValidationFailed:
        raise ValidationFailed({"overlap_hours": "choose one of the offered overlaps"}) from None
    secret_answer(request)
    return render_to_response(
        SECRET,
        {"endpoint": endpoint, "secret": secret, "rotated": True, "overlap_hours": hours},
        request=request,
    )


@view_config(route_name="pages.admin_webhook_redeliver", request_method="POST", permission=ADMIN)
def redeliver_submit(request):
    endpoint = endpoint_of(request)
    row = endpoints.get_delivery(
        request.db, endpoint, parse_path_id(request.matchdict["delivery_id"])
    )
    here = f"{PATH}/{endpoint.id}"
    try:
        endpoints.redeliver(request.db, request.registry.settings, row)
    except endpoints.RedeliveryRefused:
        return see_other(request, here, notice="webhook_redeliver_disabled")
    return see_other(request, here, notice="webhook_redelivered")
