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
    License,
    Order,
    OrderItem,
    PaymentEvent,
)
from cmsshop.models.dashboard import DownloadLog, SupportTicket
from cmsshop.models.licensing import LicenseAuditEntry, LicenseNonce
from cmsshop.models.meta import Base
from cmsshop.models.payments import PaymentSetting
from cmsshop.models.support import ErrorRecord, RateCounter

__all__ = [
    "Activation",
    "Article",
    "Base",
    "Currency",
    "DownloadLog",
    "Entitlement",
    "ErrorRecord",
    "Fulfilment",
    "Invoice",
    "InvoiceCounter",
    "License",
    "LicenseAuditEntry",
    "LicenseNonce",
    "Order",
    "OrderItem",
    "PaymentEvent",
    "PaymentSetting",
    "Product",
    "ProductPrice",
    "RateCounter",
    "Release",
    "SupportTicket",
    "User",
    "UserSession",
]
