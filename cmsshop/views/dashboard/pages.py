"""The customer's account pages (/account/...): orders, invoices, downloads and licenses.

The same services as the JSON dashboard (cmsshop.views.dashboard.api), rendered as HTML. A
download button posts to a route that asks for a fresh signed URL at click time and
answers 303 to it, so no page ever shows a signed link (it would be a credential in the
page, the history and any shared screenshot). Support tickets have pages of their own
at /account/tickets; this module's account layout links to them.
"""

from __future__ import annotations

from pyramid.httpexceptions import HTTPSeeOther
from pyramid.view import view_config

from cmsshop.security import CUSTOMER
from cmsshop.services.dashboard import records as dashboard
from cmsshop.services.dashboard.downloads import DownloadTokenSigner
from cmsshop.services.dashboard.refunds import order_refunds
from cmsshop.services.paging import PageRequest
from cmsshop.services.payments import license_changes
from cmsshop.services.store.currencies import default_currency, list_currencies
from cmsshop.services.tax import invoice_pdf
from cmsshop.services.tax.logo import logo_url
from cmsshop.views.dashboard.api import deactivate_own_activation, signed_url_body
from cmsshop.views.shared.forms import see_other
from cmsshop.views.shared.json import parse_path_id, read_page_request
from cmsshop.views.tax.invoice_pages import invoice_pdf_response
from cmsshop.web import info

NOTICES = {
    "activation_deactivated": "The activation was deactivated and its seat is free again.",
    "activation_already_inactive": info("That activation was already inactive; nothing changed."),
}

RECENT_ORDERS = 5


def _page(request, template_data: dict) -> dict:
    """What every account page passes: its data and the currencies its amounts are in."""
    currencies = {c.code: c for c in list_currencies(request.db, enabled_only=False)}
    return {"currencies": currencies, **template_data}


ACCOUNT_PAGE = {"request_method": "GET", "permission": CUSTOMER}


@view_config(route_name="account.overview", renderer="dashboard/overview.html", **ACCOUNT_PAGE)
def overview(request):
    user_id = request.user.id
    one = PageRequest(1, 1)
    return _page(
        request,
        {
            "account_section": "overview",
            "recent_orders": dashboard.list_orders(
                request.db, user_id, PageRequest(1, RECENT_ORDERS)
            ),
            "counts": {
                "invoices": dashboard.list_invoices(request.db, user_id, one).total,
                "downloads": dashboard.list_downloads(request.db, user_id, one).total,
                "licenses": dashboard.list_licenses(request.db, user_id, one).total,
            },
        },
    )


@view_config(route_name="account.orders", renderer="dashboard/orders.html", **ACCOUNT_PAGE)
def orders(request):
    page = dashboard.list_orders(request.db, request.user.id, read_page_request(request))
    return _page(request, {"account_section": "orders", "page": page})


@view_config(route_name="account.order", renderer="dashboard/order.html", **ACCOUNT_PAGE)
def order(request):
    found = dashboard.find_order(request.db, request.user.id, request.matchdict["number"])
    return _page(
        request,
        {
            "account_section": "orders",
            "order": found,
            "invoice": dashboard.invoice_of_order(request.db, found),
            "refunds": order_refunds(request.db, found),
        },
    )


@view_config(route_name="account.invoices", renderer="dashboard/invoices.html", **ACCOUNT_PAGE)
def invoices(request):
    page = dashboard.list_invoices(request.db, request.user.id, read_page_request(request))
    return _page(request, {"account_section": "invoices", "page": page})


@view_config(route_name="account.invoice", renderer="dashboard/invoice.html", **ACCOUNT_PAGE)
def invoice(request):
    found = dashboard.find_invoice(request.db, request.user.id, request.matchdict["number"])
    document = invoice_pdf.invoice_document(request.db, found)
    logo = document["logo"]
    return {
        "account_section": "invoices",
        **document,
        "logo_src": logo_url(logo) if logo is not None else None,
    }


@view_config(route_name="account.invoice_pdf", **ACCOUNT_PAGE)
def invoice_pdf_download(request):
    """The invoice as a PDF: the same document, drawn by WeasyPrint."""
    found = dashboard.find_invoice(request.db, request.user.id, request.matchdict["number"])
    return invoice_pdf_response(request, found)


@view_config(route_name="account.downloads", renderer="dashboard/downloads.html", **ACCOUNT_PAGE)
def downloads(request):
    page = dashboard.list_downloads(request.db, request.user.id, read_page_request(request))
    return _page(request, {"account_section": "downloads", "page": page})


@view_config(route_name="account.download", request_method="POST", permission=CUSTOMER)
def download(request):
    """A fresh signed URL for the newest release, made now, and a 303 to it."""
    entitlement = dashboard.find_entitlement(
        request.db, request.user.id, parse_path_id(request.matchdict["id"])
    )
    token, claims = dashboard.sign_download(
        request.db, request.find_service(DownloadTokenSigner), entitlement
    )
    url = signed_url_body(request.registry.settings["cmsshop.base_url"], token, claims)["url"]
    response = HTTPSeeOther(location=url)
    # The URL is a short-lived credential: no cache may keep the redirect.
    response.cache_control = "no-store"
    return response


@view_config(route_name="account.licenses", renderer="dashboard/licenses.html", **ACCOUNT_PAGE)
def licenses(request):
    page = dashboard.list_licenses(request.db, request.user.id, read_page_request(request))
    activations = dashboard.active_activations(request.db, [lic.id for lic in page.items])
    # Renewals and upgrades are bought through checkout (the store module).
    sells = "store" in request.registry.settings["cmsshop.modules"]
    offers = (
        license_changes.license_offers(
            request.db,
            page.items,
            request.registry.settings,
            # A license given without a purchase is renewed in the shop's default currency.
            default_currency=default_currency(request.db),
        )
        if sells
        else {}
    )
    # License keys are credentials of their own: no cache may keep this page.
    request.response.cache_control = "no-store"
    return _page(
        request,
        {
            "account_section": "licenses",
            "page": page,
            "activations": activations,
            "offers": offers,
            "status_of": dashboard.effective_license_status,
        },
    )


@view_config(route_name="account.deactivate", request_method="POST", permission=CUSTOMER)
def deactivate(request):
    result = deactivate_own_activation(request)
    return see_other(request, "/account/licenses", notice=f"activation_{result.outcome}")
