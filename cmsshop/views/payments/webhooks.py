"""POST /api/webhooks/<provider>: one view for every provider (added per provider by
cmsshop.modules.payments.add_payment_provider; authenticated by signature, no CSRF)."""

from __future__ import annotations

from cmsshop.errors import ApiError, Conflict, NotFound, ServiceUnavailable
from cmsshop.services.payments.events import errors as pe
from cmsshop.services.payments.events.delivery import receive_delivery
from cmsshop.services.payments.events.log import record_rejected
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.views.shared.json import read_body

# Rejected deliveries counted per client address (declared by the webhook machinery).

STATUSES = ["processed", "duplicate", "ignored", "needs_review", "queued"]


def delivery_error(exc: pe.DeliveryError) -> ApiError:
    """The HTTP answer to a delivery that was not handled: 2xx never, so the provider
    delivers again (except 400 for a bad signature, which a retry cannot fix)."""
    extra = {"received": not isinstance(exc, pe.DeliveryRejected | pe.WebhookNotConfigured)}
    extra["status"] = exc.event_status
    message = str(exc)
    if isinstance(exc, pe.WebhookNotConfigured):
        extra["status"] = "not_configured"
        return ServiceUnavailable(
            "This webhook has no secret configured yet.",
            code="webhook_not_configured",
            title="Webhook not configured",
            hints=["Operators: set the webhook secret in the ini or the admin settings area."],
            extra=extra,
            retry_after=300,
        )
    if isinstance(exc, pe.DeliveryRejected):
        return ApiError(
            "The signature of this delivery is invalid.",
            code="invalid_signature",
            hints=["Check that the endpoint's signing secret matches the configured one."],
            extra=extra,
        )
    if isinstance(exc, pe.VerificationUnavailable):
        return ServiceUnavailable(
            f"The signature could not be checked now: {message}",
            code="verification_unavailable",
            title="Verification unavailable",
            extra=extra,
        )
    if isinstance(exc, pe.OrderNotFound):
        return Conflict(
            f"The order of this event is not known (yet): {message}",
            code="pending_order",
            title="Order not found",
            hints=["The provider retries; the event is kept in the event log."],
            extra=extra,
        )
    if isinstance(exc, pe.ConfirmFailed):
        return ServiceUnavailable(
            f"The payment could not be confirmed with the provider: {message}",
            code="confirm_failed",
            title="Confirmation failed",
            hints=["Nothing was marked paid; the provider retries."],
            extra=extra,
            retry_after=60,
        )
    if isinstance(exc, pe.CaptureFailed):
        return ServiceUnavailable(
            f"The approved payment could not be captured now: {message}",
            code="capture_failed",
            title="Capture failed",
            hints=["Nothing was marked paid; the provider retries."],
            extra=extra,
            retry_after=60,
        )
    if isinstance(exc, pe.UnprocessableEvent):
        return ApiError(
            f"The event cannot be processed: {message}.",
            code="unprocessable_event",
            hints=["The event was logged; a redelivery gets the same answer."],
            extra=extra,
        )
    if isinstance(exc, pe.PaymentNotFinal):
        return Conflict(message, code="payment_not_final", title="Payment not final", extra=extra)
    if isinstance(exc, pe.EventNotFound):
        return NotFound(message, code="payment_event_not_found")
    if isinstance(exc, pe.CannotReprocess):
        return Conflict(message, code="cannot_reprocess", title="Cannot reprocess", extra=extra)
    return ApiError(message, status=500, code="internal_error", extra=extra)


def receive_webhook(request):
    name = request.matched_route.name.removeprefix("webhooks.")
    spec = request.find_service(PaymentProviders).get(name)
    raw = read_body(request)
    try:
        result = receive_delivery(
            request.registry, request.db, request.tm, spec, request.headers, raw
        )
    except (pe.DeliveryRejected, pe.VerificationUnavailable) as exc:
        # Both answer a delivery nobody has authenticated, so both count against the
        # address's budget and leave only the bounded summary. A 503 here is anyone's
        # to cause (an allow-listed certificate host that does not answer), so it is
        # not kept as a server-error record either.
        unavailable = isinstance(exc, pe.VerificationUnavailable)
        record_rejected(
            request.registry,
            request.find_service(RateLimiter),
            spec.provider,
            request.headers,
            raw,
            str(exc),
            request.client_addr or "unknown",
            failure="verification unavailable" if unavailable else "invalid signature",
        )
        error = delivery_error(exc)
        error.recorded = not unavailable
        raise error from None
    except pe.DeliveryError as exc:
        raise delivery_error(exc) from None
    return {"received": True, "status": result.status}
