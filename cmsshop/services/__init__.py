"""Domain logic, one package per feature; views call these, never the other way round.

    accounts/   users, password hashing
    catalogue/  products, prices, currencies, release files
    docs/       documentation articles, Markdown rendering (also used for changelogs)
    payments/   checkout, the provider event log, exactly-once fulfilment, provider
                settings and the provider plugins (card, wallet)
    dashboard/  a customer's own records (orders, invoices, entitlements), signed
                downloads and file delivery
    licensing/  issuing licenses, activate/validate/deactivate, domains, lease signing
    support/    support tickets, support codes and stored 5xx records
    ratelimit   the database-backed rate limiter shared by every feature
    demo        demo data for `make run`

Services take a SQLAlchemy session (or the registry when they need a transaction of
their own) and plain values; they never read ``request`` and return models or small
dataclasses, which the views serialise.
"""
