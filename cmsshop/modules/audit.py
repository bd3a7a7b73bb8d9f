"""The audit log, always on: the console's list (filters, CSV export) and the admin API.
Entries are written in the transaction of each admin change (services/audit)."""

from __future__ import annotations

ROUTES: dict[str, str] = {}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
