"""Which admin API routes each token scope covers.

The admin API is grouped by its first path segment after ``/api/admin/``; each group
belongs to one area scope, which covers every method there. ``read`` covers every GET
(and HEAD) of the admin API; ``all`` covers everything a token may do. Managing API
tokens needs an admin's browser session: no token can mint or revoke tokens, so a
leaked token cannot make itself a successor.
"""

from __future__ import annotations

from cmsshop.models import API_TOKEN_SCOPES

READ, ALL = "read", "all"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

SCOPE_DESCRIPTIONS = {
    READ: "Read everything in the admin API (GET only).",
    "catalogue": "Products, prices, images, releases, currencies, articles and coupons.",
    "orders": "Orders, subscriptions, refunds, payment events, support tickets and the mail "
    "outbox.",
    "licenses": "Licences and their activations.",
    "settings": "Shop, payment, brand and legal settings, webhooks and the audit log.",
    ALL: "Everything above.",
}
assert tuple(SCOPE_DESCRIPTIONS) == API_TOKEN_SCOPES

# /api/admin/<group>/... -> the scope that covers the group.
GROUP_SCOPES = {
    "products": "catalogue",
    "currencies": "catalogue",
    "articles": "catalogue",
    "coupons": "catalogue",
    "orders": "orders",
    "subscriptions": "orders",
    "payment-events": "orders",
    "tickets": "orders",
    "mail": "orders",
    "errors": "orders",
    "licenses": "licenses",
    "settings": "settings",
    "legal": "settings",
    "webhooks": "settings",
    "audit": "settings",
}
# Groups no token may call (see the module docstring).
SESSION_ONLY_GROUPS = frozenset({"api-tokens"})
ADMIN_API_PREFIX = "/api/admin/"


def route_group(pattern: str) -> str:
    """``products`` of ``/api/admin/products/{slug}``."""
    return pattern[len(ADMIN_API_PREFIX) :].split("/", 1)[0]


def area_scope(pattern: str) -> str | None:
    """The scope covering every method of an admin API route pattern; None when tokens
    cannot call it. A group missing from the table is a programming error (a test walks
    the OpenAPI document to keep the table complete)."""
    group = route_group(pattern)
    if group in SESSION_ONLY_GROUPS:
        return None
    return GROUP_SCOPES[group]


def missing_scope(scopes: list[str] | tuple[str, ...], pattern: str, method: str) -> str | None:
    """None when ``scopes`` allow ``method`` on ``pattern``; else the scope to ask for
    (``session`` for the routes no token may call)."""
    area = area_scope(pattern)
    if area is None:
        return "session"
    if ALL in scopes or area in scopes or (method in SAFE_METHODS and READ in scopes):
        return None
    return area
