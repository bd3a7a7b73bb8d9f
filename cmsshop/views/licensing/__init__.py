"""Licensing at the edge: activate, validate, deactivate and the JWKS for product
runtimes, update checks, offline activation, and the admin license pages and routes."""
