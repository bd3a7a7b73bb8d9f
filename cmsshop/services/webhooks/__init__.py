"""Outgoing webhooks: events (the outbox), signing, endpoints, delivery."""
