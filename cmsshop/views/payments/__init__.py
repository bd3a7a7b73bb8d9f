"""Payments at the edge: provider webhooks, the payment admin area (JSON and pages) and the
admin order pages."""
