"""Subscriptions: products sold as a recurring charge (``plans``), what a provider's
subscription events do to the subscription, its periods and its license (``lifecycle``),
and the step that fetches the provider's account and applies it (``events``)."""
