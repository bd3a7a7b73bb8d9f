"""The confirm step of the console's destructive actions (cmsshop/views/shared/confirm.py)."""

from __future__ import annotations


def confirmation_of(response) -> str:
    """The confirmation page's text (its heading and consequences); the page must be one."""
    assert response.status_int == 200, response.text[:500]
    assert response.forms["confirm-form"]["confirm"].value == "1"
    assert "no-store" in response.headers["Cache-Control"]
    heading = response.html.find("h1").get_text(" ", strip=True)
    body = response.html.find(id="confirm-consequences").get_text(" ", strip=True)
    return f"{heading} {body}"


def confirm(response, status: int = 303):
    """Submit the confirmation page's form (confirm=1 with the CSRF token)."""
    confirmation_of(response)
    return response.forms["confirm-form"].submit(status=status)


def cancel_link(response) -> str:
    """Where the confirmation page's cancel link goes."""
    return response.html.find(id="confirm-cancel")["href"]
