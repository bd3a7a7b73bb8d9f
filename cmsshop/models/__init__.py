"""Every model, imported here so alembic and the schema test always see all tables,
whichever feature modules are switched on."""

from cmsshop.models.accounts import User, UserSession
from cmsshop.models.catalogue import Article, Currency, Product, ProductPrice, Release
from cmsshop.models.commerce import (
    Activation,
    Entitlement,
    Fulfilment,
    Invoice,
    InvoiceCounter,
    Licence,
    Order,
    OrderItem,
    PaymentEvent,
)
from cmsshop.models.meta import Base
from cmsshop.models.support import ErrorRecord, RateCounter

__all__ = [
    "Activation",
    "Article",
    "Base",
    "Currency",
    "Entitlement",
    "ErrorRecord",
    "Fulfilment",
    "Invoice",
    "InvoiceCounter",
    "Licence",
    "Order",
    "OrderItem",
    "PaymentEvent",
    "Product",
    "ProductPrice",
    "RateCounter",
    "Release",
    "User",
    "UserSession",
]
