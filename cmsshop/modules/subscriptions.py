"""The subscriptions module, always on: the console's subscription pages and admin API
(a subscription sold through a provider must stay visible and repairable whatever
else is switched off), and, with the dashboard module, the customer's subscriptions in
the account: the next charge, cancelling at the period end, resuming, and the hand-off
to the provider's page to replace the card. The provider events are the payments
machinery's (services/subscriptions/events.py)."""

from __future__ import annotations

from cmsshop.views.subscriptions import admin_pages, openapi, pages

ADMIN_ROUTES = {
    "subscriptions.admin_list": "/api/admin/subscriptions",
    "subscriptions.admin_one": "/api/admin/subscriptions/{id}",
    "subscriptions.admin_resync": "/api/admin/subscriptions/{id}/resync",
    "pages.admin_subscriptions": "/admin/subscriptions",
    "pages.admin_subscription": "/admin/subscriptions/{id}",
    "pages.admin_subscription_resync": "/admin/subscriptions/{id}/resync",
}
# Under the dashboard module's prefixes: they answer module_disabled with it.
CUSTOMER_ROUTES = {
    "subscriptions.list": "/api/dashboard/subscriptions",
    "subscriptions.cancel": "/api/dashboard/subscriptions/{id}/cancel",
    "subscriptions.resume": "/api/dashboard/subscriptions/{id}/resume",
    "subscriptions.payment_method": "/api/dashboard/subscriptions/{id}/payment-method",
    "subscriptions.plan_preview": "/api/dashboard/subscriptions/{id}/plan-preview",
    "subscriptions.plan": "/api/dashboard/subscriptions/{id}/plan",
    "account.subscriptions": "/account/subscriptions",
    "account.subscription_cancel": "/account/subscriptions/{id}/cancel",
    "account.subscription_resume": "/account/subscriptions/{id}/resume",
    "account.subscription_payment_method": "/account/subscriptions/{id}/payment-method",
    "account.subscription_plan_preview": "/account/subscriptions/{id}/plan-preview",
    "account.subscription_plan": "/account/subscriptions/{id}/plan",
}


def includeme(config) -> None:
    for name, pattern in ADMIN_ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices(admin_pages.NOTICES)
    config.add_openapi(paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS)
    config.scan("cmsshop.views.subscriptions.admin_api")
    config.scan("cmsshop.views.subscriptions.admin_pages")
    if "dashboard" not in config.get_settings()["cmsshop.modules"]:
        return
    for name, pattern in CUSTOMER_ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices(pages.NOTICES)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.scan("cmsshop.views.subscriptions.api")
    config.scan("cmsshop.views.subscriptions.pages")
