"""Feature modules: the always-on ones, then those validated against a known list.

Every route of the application is declared here, one module per feature: each holds a
``ROUTES`` table (name -> pattern, in matching order) and scans its own views package.

As in Kinto's ``kinto.includes``, the ini names plugins and this module decides what
each name means; a raw setting is never imported as a dotted path. A known module that
is switched off still owns its URL prefixes and answers there with a 404
``module_disabled`` that tells the operator how to switch it on: JSON under /api, a plain
HTML page for its web pages.
"""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.errors import ApiError

# Always on, in this order: the core, accounts, the mail outbox, the admin order pages,
# the subscriptions (their console; the customer's pages only with the dashboard), taxes
# and legal invoices, the shop's legal pages, then the integrations: API tokens,
# outgoing webhooks and the audit log.
ALWAYS_ON = (
    "cmsshop.modules.core",
    "cmsshop.modules.accounts",
    "cmsshop.modules.mail",
    "cmsshop.modules.payments.orders",
    "cmsshop.modules.subscriptions",
    "cmsshop.modules.tax",
    "cmsshop.modules.legal",
    "cmsshop.modules.apitokens",
    "cmsshop.modules.webhooks",
    "cmsshop.modules.audit",
)

# name -> URL prefixes it owns (its admin routes and its web pages included).
KNOWN_MODULES: dict[str, tuple[str, ...]] = {
    "store": (
        "/api/store",
        "/api/admin/products",
        "/api/admin/currencies",
        "/products",
        "/checkout",
        "/admin/products",
        "/admin/currencies",
        "/media",
    ),
    "docs": ("/api/docs", "/api/admin/articles", "/docs", "/admin/articles"),
    "dashboard": (
        "/api/dashboard",
        "/api/downloads",
        "/api/admin/tickets",
        "/account",
        "/admin/tickets",
    ),
    "licensing": ("/api/license", "/api/admin/licenses", "/admin/licenses"),
    "webhooks.cardprovider": ("/api/webhooks/cardprovider",),
    "webhooks.walletprovider": ("/api/webhooks/walletprovider",),
}
# The operator-facing names of the payment plugins stay as deployed inis spell them;
# every other name is its module's own.
IMPLEMENTED_BY = {
    "webhooks.cardprovider": "cmsshop.modules.payments.cardprovider",
    "webhooks.walletprovider": "cmsshop.modules.payments.walletprovider",
}
# Prefixes owned by a group of modules together: served while any of them is on,
# answered module_disabled (naming them all) when none is. The payment admin area comes
# with whichever webhook module is enabled (cmsshop.modules.payments).
SHARED_PREFIXES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("webhooks.cardprovider", "webhooks.walletprovider"): (
        "/api/admin/settings/payments",
        "/api/admin/payment-events",
        "/api/admin/orders",
        "/admin/payments",
    ),
}


class ModuleDisabled(ApiError):
    status, code = 404, "module_disabled"


def enabled_modules(settings) -> list[str]:
    """The enabled module names in a fixed order; an unknown name stops start-up."""
    names = settings["cmsshop.modules"]
    unknown = sorted(set(names) - set(KNOWN_MODULES))
    if unknown:
        raise ConfigurationError(
            f"cmsshop.modules names unknown module(s): {', '.join(unknown)}. "
            f"Known modules: {', '.join(KNOWN_MODULES)}."
        )
    return [name for name in KNOWN_MODULES if name in names]


def _disabled_view(names: tuple[str, ...]):
    either = " or ".join(names)
    listed = " or ".join(f"`{name}`" for name in names)

    def module_disabled(request):
        raise ModuleDisabled(
            f"The {either} module is not enabled on this server.",
            title=f"Module '{either}' is disabled",
            hints=[
                f"Operators: add {listed} to `cmsshop.modules` in the ini file "
                "(or CMSSHOP_MODULES) and restart."
            ],
        )

    return module_disabled


def add_disabled_stub(config, names: tuple[str, ...], prefixes: tuple[str, ...]) -> None:
    view = _disabled_view(names)
    for index, prefix in enumerate(prefixes):
        for suffix, pattern in (("", prefix), ("*", prefix + "/*subpath")):
            route = f"disabled.{'+'.join(names)}.{index}{suffix}"
            config.add_route(route, pattern)
            config.add_view(view, route_name=route, require_csrf=False)


def includeme(config) -> None:
    enabled = enabled_modules(config.get_settings())
    for module in ALWAYS_ON:
        config.include(module)
    for name in KNOWN_MODULES:
        if name in enabled:
            config.include(IMPLEMENTED_BY.get(name, f"cmsshop.modules.{name}"))
        else:
            add_disabled_stub(config, (name,), KNOWN_MODULES[name])
    for names, prefixes in SHARED_PREFIXES.items():
        if not set(names) & set(enabled):
            add_disabled_stub(config, names, prefixes)
