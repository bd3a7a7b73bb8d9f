"""The development sandbox's "Simulate payment" button (the sandbox page itself is in
pages.py): the provider's signed "payment completed" delivery for a pending order, sent
through the real webhook route inside this process. Nothing of it exists in production:
the page does not show the button and this route answers 404 ``sandbox_disabled``."""

from __future__ import annotations

from pyramid.view import view_config
from pyramid_retry import BeforeRetry, is_error_retryable

from cmsshop.errors import ApiError, ServiceUnavailable
from cmsshop.services.payments import simulation
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.views.checkout.pages import read_own_order
from cmsshop.views.shared.forms import see_other


# The sandbox page's access (read_own_order: the customer's order or the guest's who placed
# it, a login for anyone else without a session, 404 otherwise); the two change together.
@view_config(route_name="pages.checkout_simulate", request_method="POST")
def simulate_payment(request):
    """Pay a pending order as its provider would, then show the return page (which
    shows the outcome). A paid or otherwise settled order sends nothing again."""
    if not simulation.allowed(request.registry.settings):
        # Refused before the order is even read.
        raise ApiError(
            "The payment sandbox is not available on a production site.",
            code="sandbox_disabled",
        )
    order = read_own_order(request, request.matchdict["number"])
    if order.status == "pending":
        try:
            delivery = simulation.simulated_delivery(
                request.registry,
                request.find_service(PaymentProviders),
                order.provider,
                simulation.order_snapshot(request.db, order),
            )
        except simulation.CannotSimulate as exc:
            raise ServiceUnavailable(
                f"The payment cannot be simulated: {exc}.",
                code="webhook_not_configured",
                retry_after=None,
            ) from None
        answer = deliver_to_own_webhook(request, delivery)
        if answer.status_int >= 300:
            raise webhook_refusal(answer)
    return see_other(request, f"/checkout/success?order={order.number}")


def deliver_to_own_webhook(request, delivery: simulation.SimulatedDelivery):
    """POST ``delivery`` to the webhook route inside this process, through every tween
    as a provider's delivery arrives: a request of its own, with its own pyramid_tm
    transaction and exception views. (An HTTP request to our own base URL could wait for
    a worker thread this request holds, and has no server at all under WebTest.) This
    request has only read, so it holds no lock the webhook's writes wait for: on SQLite
    its read snapshot does not stop another connection's write.

    A subrequest skips the execution policy, so pyramid_retry's attempts are run here
    as it runs them: a lost race (two clicks at once) is answered "duplicate", not 500.
    """
    attempts = request.registry.settings["retry.attempts"]
    for attempt in range(attempts):
        webhook = type(request).blank(
            delivery.path,
            base_url=request.application_url,
            environ={"REMOTE_ADDR": request.client_addr or "127.0.0.1"},
            headers=delivery.headers,
            method="POST",
            body=delivery.body,
        )
        webhook.environ.update({"retry.attempt": attempt, "retry.attempts": attempts})
        answer = request.invoke_subrequest(webhook, use_tweens=True)
        exc = getattr(webhook, "exception", None)
        if exc is None or not is_error_retryable(webhook, exc):
            return answer
        request.registry.notify(BeforeRetry(webhook, exc, answer))
    raise AssertionError("not reached: the last attempt is never retryable")


def webhook_refusal(answer) -> ApiError:
    """The webhook's refusal of a simulated delivery as this page's error: the webhook's
    status, code and message (it logged the delivery itself, so no second record)."""
    try:
        body = answer.json_body
    except ValueError:
        body = {}
    error = ApiError(
        f"The webhook refused the simulated payment: {body.get('message') or answer.status}",
        status=answer.status_int,
        code=body.get("code") or "bad_request",
        title=body.get("title"),
    )
    error.recorded = False
    return error
