"""Scoped API tokens, always on: their console page and admin API (the Bearer check
itself is in cmsshop.security, for every /api/admin route)."""

from __future__ import annotations

ROUTES: dict[str, str] = {}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
