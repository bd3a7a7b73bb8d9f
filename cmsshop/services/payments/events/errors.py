"""What can go wrong with a delivery (each mapped to HTTP by views/payments/webhooks.py) and
what a handled one answers."""

from __future__ import annotations

import dataclasses


class DeliveryError(Exception):
    """A delivery that could not be handled now; ``event_status`` is logged."""

    event_status = "error"


class WebhookNotConfigured(DeliveryError):
    """No webhook secret: 503, the provider keeps retrying until an operator sets it."""


class VerificationUnavailable(DeliveryError):
    """Verification needed something remote (a certificate) that did not answer: 503."""


class DeliveryRejected(DeliveryError):
    event_status = "rejected"


class OrderNotFound(DeliveryError):
    """409: the provider retries (the order may not be committed yet)."""

    event_status = "pending_order"


class ConfirmFailed(DeliveryError):
    """503: the provider API was unreachable or refused; nothing was marked paid."""

    event_status = "confirm_failed"


class CaptureFailed(DeliveryError):
    """503: asking the provider to capture an approved payment failed; the provider
    redelivers the approval (logged ``confirm_failed``: the provider API call failed)."""

    event_status = "confirm_failed"


class PaymentNotFinal(DeliveryError):
    """409: the event says paid, the provider API does not (yet)."""

    event_status = "confirm_failed"


class CannotReprocess(DeliveryError):
    """409: the stored event cannot be processed again (final, or still unverifiable)."""


class EventNotFound(DeliveryError):
    pass


class UnprocessableEvent(DeliveryError):
    """422: a verified event carrying text no database stores (NUL, a lone surrogate) in
    a field we store or act on. It is logged ``ignored`` and answered 4xx, so the
    provider stops redelivering something that can never succeed."""

    event_status = "ignored"


@dataclasses.dataclass(frozen=True)
class DeliveryResult:
    """``status``: processed / duplicate / ignored / needs_review, or queued (logged for
    the worker; cmsshop.payments.webhook_processing = queued): the response's."""

    status: str
    event_log_id: int | None = None
    order_number: str | None = None
    note: str = ""


@dataclasses.dataclass(frozen=True)
class OrderRef:
    id: int
    number: str
    status: str
    fulfilled: bool
    provider: str = ""
    checkout_id: str | None = None
