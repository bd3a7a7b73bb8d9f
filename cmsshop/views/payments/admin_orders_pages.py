"""Admin pages for orders (/admin/orders): always on, like the orders themselves.
Manual fulfilment posts here with the JSON route's schema and rules
(cmsshop.views.payments.admin_api.fulfil_by_hand)."""

from __future__ import annotations

from urllib.parse import quote

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, ValidationFailed
from cmsshop.models import ORDER_STATUSES
from cmsshop.security import ADMIN
from cmsshop.services.audit import queries
from cmsshop.services.payments import orders_admin, timeline
from cmsshop.views.audit.admin_pages import audit_values
from cmsshop.views.payments.admin_api import ManualFulfilSchema, fulfil_by_hand
from cmsshop.views.shared.forms import FormInvalid, field_errors, read_form, see_other
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictString,
    is_storable_text,
    read_page_request,
    read_query,
)
from cmsshop.views.shared.schema import IsoDate, text_validator

NOTICES = {
    "order_fulfilled": "The order is fulfilled: invoice, downloads and licenses exist.",
    "order_note_added": "The note was added to the order.",
}


class OrderNoteSchema(colander.MappingSchema):
    schema_type = StrictMapping
    body = colander.SchemaNode(StrictString(), validator=text_validator(1, 5000))


MAX_ORDER_NUMBER = 32


def order_filter_schema() -> colander.SchemaNode:
    schema = colander.SchemaNode(colander.Mapping())
    schema.add(
        colander.SchemaNode(
            StrictString(), name="status", missing=None, validator=colander.OneOf(ORDER_STATUSES)
        )
    )
    schema.add(
        colander.SchemaNode(
            StrictString(), name="provider", missing=None, validator=colander.Length(max=40)
        )
    )
    schema.add(
        colander.SchemaNode(
            StrictString(), name="customer", missing=None, validator=colander.Length(max=320)
        )
    )
    schema.add(colander.SchemaNode(IsoDate(), name="from", missing=None))
    schema.add(colander.SchemaNode(IsoDate(), name="to", missing=None))
    return schema


def order_number(request) -> str:
    number = request.matchdict["number"]
    if not number or len(number) > MAX_ORDER_NUMBER or not is_storable_text(number):
        raise order_not_found()
    return number


def order_not_found() -> NotFound:
    return NotFound("No order has this number.", code="order_not_found")


def order_path(number: str) -> str:
    return f"/admin/orders/{quote(number, safe='')}"


# --- orders ---------------------------------------------------------------------------------


@view_config(
    route_name="pages.admin_orders",
    request_method="GET",
    renderer="admin/payments/orders.html",
    permission=ADMIN,
)
def orders_page(request):
    paging = read_page_request(request)
    data, typed = read_query(request, order_filter_schema())
    if data["from"] and data["to"] and data["to"] < data["from"]:
        raise ValidationFailed({"to": "must not be before the start date"})
    filters = orders_admin.OrderFilters(
        status=data["status"],
        provider=data["provider"],
        customer=data["customer"],
        date_from=data["from"],
        date_to=data["to"],
    )
    page = orders_admin.list_orders(request.db, paging, filters)
    return {
        "admin_section": "orders",
        "page": page,
        "filters": typed,
        "statuses": ORDER_STATUSES,
    }


def _order_page(request, number: str, errors: dict | None = None, form: dict | None = None):
    try:
        detail = orders_admin.order_detail(request.db, number)
    except orders_admin.OrderMissing:
        raise order_not_found() from None
    return {
        "admin_section": "orders",
        "detail": detail,
        "timeline": timeline.order_timeline(request.db, detail.order),
        **audit_values(request.db, queries.order_entries(request.db, detail.order)),
        "order_url": order_path(number),
        "errors": errors or {},
        "form": form or {},
    }


@view_config(
    route_name="pages.admin_order",
    request_method="GET",
    renderer="admin/payments/order.html",
    permission=ADMIN,
)
def order_page(request):
    return _order_page(request, order_number(request))


@view_config(
    route_name="pages.admin_order_fulfil",
    request_method="POST",
    renderer="admin/payments/order.html",
    permission=ADMIN,
)
def order_fulfil_submit(request):
    number = order_number(request)
    typed = {name: request.POST.get(name, "") for name in ("reason", "paymentReference")}
    try:
        data = read_form(request, ManualFulfilSchema())
        fulfil_by_hand(request, number, data["reason"], data["paymentReference"])
    except FormInvalid as exc:
        request.response.status = 422
        return _order_page(request, number, exc.errors, exc.form)
    except NotFound:
        raise
    except ApiError as exc:  # already fulfilled, not fulfillable, no reason
        request.response.status = exc.status
        return _order_page(request, number, field_errors(exc), typed)
    return see_other(request, order_path(number), notice="order_fulfilled")


@view_config(
    route_name="pages.admin_order_notes",
    request_method="POST",
    renderer="admin/payments/order.html",
    permission=ADMIN,
)
def order_note_submit(request):
    number = order_number(request)
    try:
        data = read_form(request, OrderNoteSchema())
        orders_admin.add_order_note(request.db, number, request.user, data["body"])
    except FormInvalid as exc:
        request.response.status = 422
        errors = {f"note_{name}": message for name, message in exc.errors.items()}
        return _order_page(request, number, errors, {"note_body": exc.form.get("body", "")})
    except orders_admin.OrderMissing:
        raise order_not_found() from None
    return see_other(request, order_path(number) + "#notes", notice="order_note_added")
