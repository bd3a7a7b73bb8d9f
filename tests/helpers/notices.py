"""The one-time notice a post/redirect/get leaves in the flash cookie (cmsshop.web)."""

from __future__ import annotations

from http.cookies import SimpleCookie

from cmsshop.web import FLASH_COOKIE


def flashed(response) -> str | None:
    """The notice key ``response`` sets for the next page (None if it sets none)."""
    for header in response.headers.getall("Set-Cookie"):
        cookie = SimpleCookie()
        cookie.load(header)
        if FLASH_COOKIE in cookie and cookie[FLASH_COOKIE].value:
            return cookie[FLASH_COOKIE].value
    return None


def wait_for_notice(page, key: str) -> None:
    """Wait until the page the browser landed on shows the one-time notice ``key``."""
    page.locator(f'#page-notice[data-notice="{key}"]').wait_for()
