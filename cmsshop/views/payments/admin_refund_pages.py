"""The console's refund of an order, without JavaScript (always on, like the order pages):

GET  /admin/orders/{number}/refund          the form: full, lines (or part of one), amount
POST /admin/orders/{number}/refund          checked (no writes): the confirmation page,
                                            naming the amount, the lines and what will be
                                            revoked, with a one-time token
POST /admin/orders/{number}/refund/confirm  the refund asked of the provider (the token
                                            makes the idempotency key: a double click or
                                            a re-sent form refunds once) -> 303 to
GET  /admin/orders/{number}/refunds/{id}    the refund as it stands (no notice carried in
                                            the URL: the page shows the row's state)

Refusals (an unpaid order, too much, nothing chosen) come back on the form beside their
fields (422). The JSON route's service and rules (services/payments/refunds.py)."""

from __future__ import annotations

import secrets

from pyramid.view import view_config

from cmsshop.errors import NotFound
from cmsshop.models.meta import MAX_ID
from cmsshop.security import ADMIN
from cmsshop.services.payments import refunds
from cmsshop.services.store.currencies import find_currency, parse_major_amount
from cmsshop.services.subscriptions import refund_cancel
from cmsshop.views.payments.admin_orders_pages import order_not_found, order_number, order_path
from cmsshop.views.payments.admin_refunds import providers_of
from cmsshop.views.shared.forms import FormInvalid, posted_value, see_other
from cmsshop.views.shared.json import is_storable_text

KINDS = ("full", "lines", "amount")
TOKEN_BYTES = 24


def _situation(request, number: str) -> refunds.Refundable:
    try:
        return refunds.refund_situation(request.db, number, providers_of(request))
    except refunds.OrderMissing:
        raise order_not_found() from None


def _page(request, situation, *, errors=None, form=None) -> dict:
    order = situation.order
    currency = find_currency(request.db, order.currency)
    return {
        "admin_section": "orders",
        "order": order,
        "currency": currency,
        "situation": situation,
        "order_url": order_path(order.number),
        "errors": errors or {},
        "form": form or {"kind": "full"},
    }


def read_refund_form(request, situation) -> tuple[dict, dict]:
    """The posted refund: (the service's arguments, the form as typed); FormInvalid with
    a message per field. Amounts are typed in major units of the order's currency."""
    decimals = find_currency(request.db, situation.order.currency).decimals
    kind = posted_value(request, "kind")
    reason = posted_value(request, "reason")
    chosen = [value for value in request.POST.getall("line") if value]
    typed = {
        "kind": kind,
        "reason": reason,
        "amount": posted_value(request, "amount"),
        "lines": chosen,
    }
    items = {str(item.id): item for item in situation.order.items}
    for item_id in items:
        typed[f"line_amount_{item_id}"] = posted_value(request, f"line_amount_{item_id}")
    errors: dict[str, str] = {}
    # The confirmation page's box (ticked: cancel the subscription the refund ends); a
    # form without the box (none ends) cancels, as the API's default does.
    if posted_value(request, "subscription_choice"):
        typed["cancel_subscription"] = posted_value(request, "cancel_subscription") == "1"
    if kind not in KINDS:
        errors["kind"] = "choose a full refund, lines, or an amount"
    if len(reason) > refunds.MAX_REASON or not is_storable_text(reason):
        errors["reason"] = f"at most {refunds.MAX_REASON} characters of text"
    arguments: dict = {"reason": reason}
    if "cancel_subscription" in typed:
        arguments["cancel_subscription"] = typed["cancel_subscription"]
    if kind == "full":
        arguments["full"] = True
    elif kind == "amount":
        try:
            arguments["amount"] = parse_major_amount(typed["amount"], decimals)
        except ValueError as exc:
            errors["amount"] = str(exc)
    elif kind == "lines":
        lines: dict[int, int | None] = {}
        if not chosen:
            errors["lines"] = "tick at least one line"
        for value in chosen:
            if value not in items:
                errors["lines"] = "tick lines of this order"
                continue
            raw = typed[f"line_amount_{value}"].strip()
            if not raw:
                lines[int(value)] = None
                continue
            try:
                lines[int(value)] = parse_major_amount(raw, decimals)
            except ValueError as exc:
                errors[f"line_{value}"] = str(exc)
        arguments["lines"] = lines
    if errors:
        raise FormInvalid(errors, typed)
    return arguments, typed


def _refusal(exc: refunds.RefundInvalid, typed: dict) -> dict[str, str]:
    """The service's refusal beside its field: a line's on the line, an amount's on the
    amount (or on the lines / the form for a full refund)."""
    errors = {}
    for name, message in exc.errors.items():
        if name == "amount" and typed.get("kind") != "amount":
            name = "form"
        errors[name] = message
    if exc.code == "order_not_refundable":
        errors = {"form": exc.message}
    return errors


@view_config(
    route_name="pages.admin_order_refund",
    request_method="GET",
    renderer="admin/payments/refund.html",
    permission=ADMIN,
)
def refund_form(request):
    return _page(request, _situation(request, order_number(request)))


@view_config(
    route_name="pages.admin_order_refund",
    request_method="POST",
    renderer="admin/payments/refund.html",
    permission=ADMIN,
)
def refund_review(request):
    """The confirmation step: what the refund will do, checked, nothing written."""
    number = order_number(request)
    situation = _situation(request, number)
    try:
        arguments, typed = read_refund_form(request, situation)
        plan = refunds.plan_refund(
            request.db,
            number,
            providers_of(request),
            full=arguments.get("full", False),
            amount=arguments.get("amount"),
            lines=arguments.get("lines"),
        )
    except FormInvalid as exc:
        request.response.status = 422
        return _page(request, situation, errors=exc.errors, form=exc.form)
    except refunds.RefundInvalid as exc:
        request.response.status = 422 if exc.code != "order_not_refundable" else 409
        return _page(request, situation, errors=_refusal(exc, typed), form=typed)
    names = {item.id: item.name for item in situation.order.items}
    request.override_renderer = "admin/payments/refund_confirm.html"
    ended = refund_cancel.subscription_ended_by(request.db, situation.order) if plan.full else None
    return {
        **_page(request, situation, form=typed),
        "ends_subscription": ended if ended is not None and ended.status != "ended" else None,
        "plan": plan,
        "plan_lines": [(names[line["item"]], line["amount"]) for line in plan.lines or []],
        "token": secrets.token_urlsafe(TOKEN_BYTES),
        "line_amount_fields": {
            key: value for key, value in typed.items() if key.startswith("line_amount_")
        },
    }


@view_config(
    route_name="pages.admin_order_refund_confirm",
    request_method="POST",
    renderer="admin/payments/refund.html",
    permission=ADMIN,
)
def refund_confirm(request):
    number = order_number(request)
    situation = _situation(request, number)
    token = posted_value(request, "token")
    if not 16 <= len(token) <= 64 or not token.isascii() or not token.isprintable():
        request.response.status = 422
        return _page(
            request,
            situation,
            errors={"form": "The confirmation expired; review the refund again."},
        )
    try:
        arguments, typed = read_refund_form(request, situation)
        view, _created = refunds.request_refund(
            request.registry,
            providers_of(request),
            number,
            token=token,
            admin_id=request.user.id,
            **arguments,
        )
    except FormInvalid as exc:
        request.response.status = 422
        return _page(request, situation, errors=exc.errors, form=exc.form)
    except refunds.RefundInvalid as exc:
        request.response.status = 422 if exc.code != "order_not_refundable" else 409
        return _page(request, situation, errors=_refusal(exc, typed), form=typed)
    except refunds.OrderMissing:
        raise order_not_found() from None
    except refunds.RefundFailed as exc:  # the row says failed, with the error
        view = exc.refund
    return see_other(request, f"{order_path(number)}/refunds/{view.id}")


@view_config(
    route_name="pages.admin_order_refund_result",
    request_method="GET",
    renderer="admin/payments/refund_result.html",
    permission=ADMIN,
)
def refund_result(request):
    number = order_number(request)
    raw = request.matchdict["id"]
    refund_id = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 10 else 0
    if not 1 <= refund_id <= MAX_ID:
        raise NotFound("No refund of this order has this id.", code="not_found")
    try:
        view = refunds.refund_view(request.db, number, refund_id)
    except refunds.OrderMissing:
        raise order_not_found() from None
    if view is None:
        raise NotFound("No refund of this order has this id.", code="not_found")
    situation = _situation(request, number)
    names = {item.id: item.name for item in situation.order.items}
    return {
        **_page(request, situation),
        "refund": view,
        "refund_lines": [
            (names.get(line["item"], "?"), line["amount"]) for line in view.lines or []
        ],
    }
