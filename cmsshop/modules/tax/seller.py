"""Wiring of the tax feature's seller part."""

from __future__ import annotations

ROUTES: dict[str, str] = {}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
