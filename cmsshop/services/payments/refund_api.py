"""What the refund service asks of a provider, and what a provider answers (the
optional ``refund`` method of a provider, next to ``capture``):

    def refund(self, call: RefundCall, config: Mapping[str, Any]) -> ProviderRefund

It must send ``call.idempotency_key`` as the provider's idempotency key (Stripe's
``Idempotency-Key``, PayPal's ``PayPal-Request-Id``), so the same call made twice refunds
once. It raises ``RefundRefused`` when the provider answered and said no (an amount over
what is left, a payment it does not know, wrong credentials: retrying the same call
will not help), ``base.ProviderUnavailable`` when it could not be reached or answered
with a server error (retrying later may), ``base.NotConfigured`` without credentials.
"""

from __future__ import annotations

import dataclasses

# What a provider's refund is once created: ``pending`` (the money is on its way; its
# event confirms it) or ``succeeded`` (done at once). Either way the order's grants change
# only when the provider's refund event arrives.
PROVIDER_REFUND_STATUSES = ("pending", "succeeded")


@dataclasses.dataclass(frozen=True)
class RefundCall:
    order_number: str
    payment_reference: str  # Stripe PaymentIntent id, PayPal capture id (or sale id)
    amount: int  # minor units, > 0
    currency: str  # upper-case ISO 4217
    idempotency_key: str
    reason: str = ""
    # The payment is a subscription's (it paid a period in subscription_periods): PayPal
    # takes those as v1 sales, refunded through another API than a checkout's capture.
    subscription_payment: bool = False


@dataclasses.dataclass(frozen=True)
class ProviderRefund:
    refund_id: str
    status: str  # one of PROVIDER_REFUND_STATUSES


class RefundRefused(Exception):
    """The provider refused the refund; ``str(exc)`` says why, precisely and safely (no
    key, no request body)."""
