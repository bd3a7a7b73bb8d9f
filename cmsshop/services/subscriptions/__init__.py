"""Subscriptions: products sold as a recurring charge (``plans``), what a provider's
subscription events do to the subscription, its periods and its license (``lifecycle``),
and the step that fetches the provider's account and applies it (``events``).

``provider_plans``  plans made at a provider that bills against plans made in advance
``parked``          payments whose event names no subscription: matched, or parked
``selfservice``     the customer's account: cancel, resume, the provider's card page
``reconcile``       repairing the drift from the provider's account (and parked payments)
``refund_cancel``   a full refund of its first or latest order cancels it at the provider
``admin``           the console's list and timeline
"""
