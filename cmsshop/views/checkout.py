"""Checkout routes (placeholder until the payments issue lands); included by the store module."""


def includeme(config) -> None:
    pass
