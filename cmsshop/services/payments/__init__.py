"""Payments: checkout, the provider event log, exactly-once fulfilment and the order
state machine, renewals and upgrades of licenses (``license_changes``), provider
settings, and one module per payment provider (the provider contract is in ``base``)."""
