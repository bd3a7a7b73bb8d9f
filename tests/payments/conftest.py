"""Fixtures of the payment tests (the fakes' fixtures are in tests/fakes/payment_fixtures.py)."""

from __future__ import annotations

import pytest
from helpers.clients import logged_in


@pytest.fixture
def card_admin_pages(card_app, admin):
    """The admin, logged in to the app with the fake card provider (a page client)."""
    return logged_in(card_app, admin)
