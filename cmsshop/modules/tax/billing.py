"""Wiring of the tax feature's billing part."""

from __future__ import annotations

ROUTES: dict[str, str] = {}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
