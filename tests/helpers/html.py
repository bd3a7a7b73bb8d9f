"""Reading rendered pages."""

from __future__ import annotations


def title_of(response) -> str:
    return response.html.title.get_text(strip=True)


def h1_of(response) -> str:
    """The text of the page's one <h1>."""
    headings = response.html.find_all("h1")
    assert len(headings) == 1, headings
    return headings[0].get_text(strip=True)


def errors_of(response) -> dict[str, str]:
    """A form's field errors, by field name."""
    return {
        p["id"].removeprefix("f-").removesuffix("-error"): p.get_text(strip=True)
        for p in response.html.find_all("p", class_="error")
    }


def assert_error_page(response, status: int) -> None:
    assert response.status_int == status, response.text[:500]
    assert response.content_type == "text/html"
    assert response.html.find(class_="support-code") is not None
    assert "Traceback" not in response.text
