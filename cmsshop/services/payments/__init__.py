"""Payments: checkout, the provider event log, exactly-once fulfilment and the order
state machine, renewals and upgrades of licenses (``license_changes``), what a placed
order's lines say to providers, invoices and receipts (``lines``), provider settings, and
one module per payment provider (the provider contract is in ``base``)."""
