"""Scoped API tokens: tokens (create, find, revoke), scopes (which routes each covers)."""
