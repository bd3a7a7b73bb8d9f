"""Every model, imported here so alembic and the schema test always see all tables,
whichever feature modules are switched on. One module per feature, as in services/:

    accounts   User, UserSession, AccountToken, AuditEntry
    apitokens  ApiToken (scoped tokens of the admin API)
    catalogue  Currency, Product, ProductPrice, ProductImage, MediaFile, Release, Article,
               ContentVersion
    legal      LegalDocument (terms, privacy policy, legal notice, refund policy)
    checkout   Cart, CartLine, Coupon, CouponAmount, CouponProduct, CouponRedemption
    commerce   Order, OrderItem, OrderNote, Fulfilment, Invoice, InvoiceCounter, Entitlement,
               Refund
    payments   PaymentEvent (the provider event log), PaymentSetting
    licensing  License, Activation, LicenseNonce, LicenseAuditEntry
    dashboard  DownloadLog
    support    SupportTicket, TicketMessage, ErrorRecord
    mail       OutboxMessage (the transactional outbox)
    subscriptions  SubscriptionPlan, Subscription, SubscriptionPeriod,
                   SubscriptionProviderPlan, ParkedPayment
    webhooks   WebhookEndpoint, WebhookEvent, WebhookDelivery, WebhookAttempt (outgoing)
    ratelimit  RateCounter
    tax        ShopSetting, ShopFile, BillingProfile, CreditNote, CreditNoteCounter

The status constants (``ORDER_STATUSES``...) are the single source of the CHECK
constraints and of the OpenAPI enums.
"""

from cmsshop.models.accounts import (
    ROLES,
    TOKEN_PURPOSES,
    AccountToken,
    AuditEntry,
    User,
    UserSession,
)
from cmsshop.models.apitokens import API_TOKEN_SCOPES, ApiToken
from cmsshop.models.checkout import (
    COUPON_KINDS,
    REDEMPTION_STATUSES,
    Cart,
    CartLine,
    Coupon,
    CouponAmount,
    CouponProduct,
    CouponRedemption,
)
from cmsshop.models.commerce import (
    ENTITLEMENT_STATUSES,
    FREE_PROVIDER,
    ITEM_KINDS,
    ORDER_STATUSES,
    REFUND_STATUSES,
    Entitlement,
    Fulfilment,
    Invoice,
    InvoiceCounter,
    LicenseChange,
    LicenseReview,
    Order,
    OrderItem,
    OrderNote,
    Refund,
)
from cmsshop.models.dashboard import DELIVERY_MODES, DownloadLog
from cmsshop.models.legal import LEGAL_KINDS, LegalDocument
from cmsshop.models.licensing import (
    LICENSE_STATUSES,
    Activation,
    License,
    LicenseAuditEntry,
    LicenseNonce,
)
from cmsshop.models.mail import MAIL_STATUSES, OutboxMessage
from cmsshop.models.meta import Base
from cmsshop.models.payments import EVENT_STATUSES, PaymentEvent, PaymentSetting
from cmsshop.models.ratelimit import RateCounter
from cmsshop.models.store import (
    RELEASE_CHANNELS,
    VERSION_SCHEMES,
    Article,
    ContentVersion,
    Currency,
    MediaFile,
    Product,
    ProductImage,
    ProductPrice,
    Release,
)
from cmsshop.models.subscriptions import (
    INTERVALS,
    RENEWING_STATUSES,
    SUBSCRIPTION_STATUSES,
    ParkedPayment,
    Subscription,
    SubscriptionPeriod,
    SubscriptionPlan,
    SubscriptionProviderPlan,
)
from cmsshop.models.support import TICKET_STATUSES, ErrorRecord, SupportTicket, TicketMessage
from cmsshop.models.tax import (
    BillingProfile,
    CreditNote,
    CreditNoteCounter,
    ShopFile,
    ShopSetting,
)
from cmsshop.models.webhooks import (
    ATTEMPT_OUTCOMES,
    DELIVERY_STATUSES,
    TEST_EVENT_TYPE,
    WEBHOOK_EVENT_TYPES,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)

__all__ = [
    "INTERVALS",
    "RENEWING_STATUSES",
    "SUBSCRIPTION_STATUSES",
    "ParkedPayment",
    "Subscription",
    "SubscriptionPeriod",
    "SubscriptionPlan",
    "SubscriptionProviderPlan",
    "API_TOKEN_SCOPES",
    "ATTEMPT_OUTCOMES",
    "DELIVERY_STATUSES",
    "TEST_EVENT_TYPE",
    "WEBHOOK_EVENT_TYPES",
    "ApiToken",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "COUPON_KINDS",
    "FREE_PROVIDER",
    "REDEMPTION_STATUSES",
    "Cart",
    "CartLine",
    "Coupon",
    "CouponAmount",
    "CouponProduct",
    "CouponRedemption",
    "ContentVersion",
    "DELIVERY_MODES",
    "ENTITLEMENT_STATUSES",
    "ITEM_KINDS",
    "LicenseChange",
    "LicenseReview",
    "EVENT_STATUSES",
    "LICENSE_STATUSES",
    "MAIL_STATUSES",
    "ORDER_STATUSES",
    "REFUND_STATUSES",
    "RELEASE_CHANNELS",
    "VERSION_SCHEMES",
    "ROLES",
    "TICKET_STATUSES",
    "TOKEN_PURPOSES",
    "AccountToken",
    "AuditEntry",
    "LEGAL_KINDS",
    "LegalDocument",
    "MediaFile",
    "ProductImage",
    "BillingProfile",
    "Activation",
    "Article",
    "Base",
    "CreditNote",
    "CreditNoteCounter",
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
    "OrderNote",
    "Refund",
    "OutboxMessage",
    "PaymentEvent",
    "PaymentSetting",
    "Product",
    "ProductPrice",
    "RateCounter",
    "ShopFile",
    "ShopSetting",
    "Release",
    "SupportTicket",
    "TicketMessage",
    "User",
    "UserSession",
]
