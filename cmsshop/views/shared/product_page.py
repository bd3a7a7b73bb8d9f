"""A product's page with its buy form: what the store shows it with and what checkout
shows again beside the errors of a refused purchase."""

from __future__ import annotations

import re

from cmsshop.services.checkout.pricing import max_quantity
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.store import currencies, media, products
from cmsshop.services.subscriptions import plans as subscription_plans
from cmsshop.services.tax import billing

# How the buy form names a provider (its registry name otherwise).
PROVIDER_LABELS = {"cardprovider": "Card", "walletprovider": "PayPal"}
CURRENCY_CODE = re.compile(r"^[A-Z]{3}$")


def provider_choices(request) -> list[tuple[str, str]]:
    return [
        (name, PROVIDER_LABELS.get(name, name))
        for name in request.find_service(PaymentProviders).names()
    ]


def product_page_values(
    request,
    slug: str,
    currency: str | None,
    errors: dict | None = None,
    form: dict | None = None,
) -> dict:
    """What templates/store/product.html shows: the product (404 unless published) with
    its prices (all of them for the buy form; ``currency``'s alone are shown when given)."""
    product = products.find_product(request.db, slug, public=True)
    (card,) = products.load_cards(request.db, [product])
    shown = [p for p in card.prices if p.currency == currency] if currency else card.prices
    form = dict(form or {})
    choices = [
        (p.currency, f"{p.currency} – {currencies.format_amount(p.amount, p.symbol, p.decimals)}")
        for p in card.prices
    ]
    typed = form.get("currency")
    if typed and typed not in {value for value, _ in choices} and CURRENCY_CODE.match(typed):
        # A choice the product is not (or no longer) sold in stays selected beside its error.
        choices.append((typed, f"{typed} (not available)"))
    if "currency" not in form:
        offered = [p.currency for p in card.prices]
        default = currencies.default_currency(request.db)
        chosen = currency if currency in offered else default
        form["currency"] = chosen if chosen in offered else next(iter(offered), "")
    form.setdefault("quantity", "1")
    if request.user is not None and "country" not in form:
        # The buy form's billing fields start with the customer's saved details.
        saved = billing.profile_details(billing.load_profile(request.db, request.user.id))
        if saved is not None:
            form.update({key: value or "" for key, value in saved.as_api().items()})
    images = media.images_of(request.db, product.id)
    og = images[0].variants["og"] if images else None
    return {
        # The product's pictures in the seller's order; the first one's 1200 × 630 crop
        # is the link preview's (og:image must be an absolute URL).
        "images": images,
        "og_image": request.application_url + media.media_url(media.fallback_key(og))
        if og
        else None,
        "max_quantity": max_quantity(product),
        "card": card,
        "product": product,
        "shown_prices": shown,
        "currency": currency or "",
        "currency_choices": choices,
        "provider_choices": provider_choices(request),
        "errors": errors or {},
        "form": form,
        "countries": billing.country_choices(),
        # Sold as a subscription: said beside the price and on the button ("every month").
        "billing_cycle": subscription_plans.billing_cycle(request.db, [product.id]),
        # Its free trial, for a customer's first subscription of it (the page is the
        # same for everyone: the cart says whether this buyer gets it).
        "trial_days": subscription_plans.trial_offered(request.db, [product.id]),
    }
